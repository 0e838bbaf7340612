// TIC priorities for the remote receives of one partitioned TF graph (TF-free: the TF side
// turns a GraphDef into NodeSpecs). Recvs are the nodes with is_remote_recv; every other node
// is a compute op (unit time; TIC needs none). Pure function; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tictac::tfrdv {

struct NodeSpec {
  std::string name;
  std::vector<std::string> inputs;  // node names (":k" and "^" already stripped)
  bool is_remote_recv = false;
  std::string edge;  // the recv's tensor_name (the rendezvous key's edge name)
};

// policy "tic": TIC priority per edge (smaller = sent first); "none": every edge 0.
// Inputs naming absent nodes are dropped. Returns false with *error on a malformed graph.
bool edge_priorities(const std::vector<NodeSpec>& nodes, const std::string& policy,
                     std::unordered_map<std::string, std::int64_t>* out, std::string* error);

}  // namespace tictac::tfrdv
