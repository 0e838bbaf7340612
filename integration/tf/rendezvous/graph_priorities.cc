// TIC and TAC on a partitioned TF graph, through priority::Graph and the shared policies.
#include "integration/tf/rendezvous/graph_priorities.h"

#include <unordered_set>

#include "common/json.h"
#include "priority/graph.h"
#include "priority/policies/tac.h"
#include "priority/policies/tic.h"

namespace tictac::tfrdv {

bool parse_tac_timings(const std::string& json_text, TacTimings* out, std::string* error) {
  auto doc = json::parse(json_text);
  if (!doc.ok()) {
    *error = doc.status().message();
    return false;
  }
  const json::Value* ops = doc->is_object() ? doc->find("ops") : nullptr;
  if (ops == nullptr || !ops->is_object()) {
    *error = "expected an object with \"ops\": {\"node name\": seconds, ...}";
    return false;
  }
  for (const json::Member& m : ops->members()) {
    if (!m.value.is_number() || m.value.as_number() < 0) {
      *error = m.value.where() + ": ops[\"" + m.key + "\"] must be a number of seconds >= 0";
      return false;
    }
    out->op_seconds[m.key] = m.value.as_number();
  }
  if (const json::Value* d = doc->find("default_op_seconds")) {
    if (!d->is_number() || d->as_number() < 0) {
      *error = d->where() + ": default_op_seconds must be a number >= 0";
      return false;
    }
    out->default_op_seconds = d->as_number();
  }
  if (const json::Value* b = doc->find("bandwidth_bps")) {
    if (!b->is_number() || b->as_number() <= 0) {
      *error = b->where() + ": bandwidth_bps must be a number > 0 (bits/s)";
      return false;
    }
    out->bandwidth_bps = b->as_number();
  }
  return true;
}

bool edge_priorities(const std::vector<NodeSpec>& nodes, const std::string& policy,
                     std::unordered_map<std::string, std::int64_t>* out, std::string* error,
                     const TacTimings* tac) {
  if (policy == "none") {
    for (const auto& n : nodes)
      if (n.is_remote_recv) (*out)[n.edge] = 0;
    return true;
  }
  if (policy != "tic" && policy != "tac") {
    *error = "unknown TICTAC_TF_POLICY '" + policy + "' (expected tic, tac or none)";
    return false;
  }
  if (policy == "tac" && tac == nullptr) {
    *error = "policy tac needs op timings (TICTAC_TF_OP_TIMES)";
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
      s.bytes = tac != nullptr && n.bytes > 0 ? n.bytes : 1;
    } else {
      s.kind = priority::OpKind::compute;
      s.time = 1e-5;
      if (tac != nullptr) {
        auto t = tac->op_seconds.find(n.name);
        s.time = t != tac->op_seconds.end() ? t->second : tac->default_op_seconds;
      }
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
  priority::PolicyOptions options;
  if (tac != nullptr) options.bandwidth_bps = tac->bandwidth_bps;
  auto schedule = policy == "tac" ? priority::policies::tac_policy(*graph, options)
                                  : priority::policies::tic_policy(*graph, options);
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
