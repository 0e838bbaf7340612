// TIC or TAC priorities for the remote receives of one partitioned TF graph (TF-free: the TF
// side turns a GraphDef into NodeSpecs). Recvs are the nodes with is_remote_recv; every other
// node is a compute op (TIC needs no times; TAC takes them from TacTimings). Pure functions;
// thread-safe.
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
  std::uint64_t bytes = 0;  // recvs: the tensor's size when the graph states it (0 = unknown)
};

// Inputs of policy "tac" (TICTAC_TF_POLICY=tac): profiled compute seconds per node name (nodes
// not listed take default_op_seconds) and the link's bandwidth, which turns a recv's bytes into
// its transfer time (a recv of unknown size counts as 1 byte).
struct TacTimings {
  std::unordered_map<std::string, double> op_seconds;
  double default_op_seconds = 1e-5;
  double bandwidth_bps = 10e9;
};

// The TICTAC_TF_OP_TIMES file: {"ops": {"node name": seconds, ...}, "default_op_seconds": s,
// "bandwidth_bps": b} (only "ops" is required; times >= 0, bandwidth > 0). Returns false with
// *error naming the offending field.
bool parse_tac_timings(const std::string& json_text, TacTimings* out, std::string* error);

// policy "tic": TIC priority per edge (smaller = sent first); "tac": TAC with `tac` (required);
// "none": every edge 0. Inputs naming absent nodes are dropped. Returns false with *error on a
// malformed graph or a missing `tac`.
bool edge_priorities(const std::vector<NodeSpec>& nodes, const std::string& policy,
                     std::unordered_map<std::string, std::int64_t>* out, std::string* error,
                     const TacTimings* tac = nullptr);

}  // namespace tictac::tfrdv
