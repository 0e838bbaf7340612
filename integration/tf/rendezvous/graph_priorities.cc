// TIC on a partitioned TF graph, through priority::Graph and the shared TIC policy.
#include "integration/tf/rendezvous/graph_priorities.h"

#include <unordered_set>

#include "priority/graph.h"
#include "priority/policies/tic.h"

namespace tictac::tfrdv {

bool edge_priorities(const std::vector<NodeSpec>& nodes, const std::string& policy,
                     std::unordered_map<std::string, std::int64_t>* out, std::string* error) {
  if (policy == "none") {
    for (const auto& n : nodes)
      if (n.is_remote_recv) (*out)[n.edge] = 0;
    return true;
  }
  if (policy != "tic") {
    *error = "unknown TICTAC_TF_POLICY '" + policy + "' (expected tic or none)";
    return false;
  }
  std::unordered_set<std::string> names;
  for (const auto& n : nodes) names.insert(n.name);
  std::vector<priority::OpSpec> specs;
  specs.reserve(nodes.size());
  bool any_recv = false;
  for (const auto& n : nodes) {
    priority::OpSpec s;
    s.name = n.name;
    if (n.is_remote_recv) {
      any_recv = true;
      s.kind = priority::OpKind::recv;
      s.bytes = 1;
    } else {
      s.kind = priority::OpKind::compute;
      s.time = 1e-5;
      for (const auto& in : n.inputs)
        if (in != n.name && names.count(in)) s.inputs.push_back(in);
    }
    specs.push_back(std::move(s));
  }
  if (!any_recv) return true;
  auto graph = priority::Graph::build(std::move(specs));
  if (!graph.ok()) {
    *error = graph.status().to_string();
    return false;
  }
  auto schedule = priority::policies::tic_policy(*graph, priority::PolicyOptions{});
  if (!schedule.ok()) {
    *error = schedule.status().to_string();
    return false;
  }
  std::unordered_map<std::string, const std::string*> edge_of;
  for (const auto& n : nodes)
    if (n.is_remote_recv) edge_of[n.name] = &n.edge;
  for (std::size_t i = 0; i < graph->recvs().size(); ++i)
    (*out)[*edge_of.at(graph->op(graph->recvs()[i]).name)] = schedule->priority[i];
  return true;
}

}  // namespace tictac::tfrdv
