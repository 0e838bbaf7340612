// Schedule: the output of a policy, one integer priority per recv (smaller = sent earlier).
// Equal priorities are allowed (TIC's ties); the transport breaks them FIFO by submission.
// Also the time oracle shared by TAC, the simulator and the CLI. Pure values; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "priority/graph.h"

namespace tictac::priority {

struct Schedule {
  std::string policy;
  // Indexed like graph.recvs(): priority[i] belongs to recv graph.recvs()[i].
  std::vector<std::int64_t> priority;
};

// Recv indices (positions in graph.recvs()) sorted by (priority, recv index).
std::vector<int> send_order(const Schedule& schedule);

// Options shared by all policies.
struct PolicyOptions {
  double bandwidth_bps = 10e9;  // for recvs without 'time': time = bytes * 8 / bandwidth
  std::uint64_t seed = 0;       // for 'random'
};

// Time(op) in seconds: a compute op's time; a recv's time if given, else bytes*8/bandwidth.
double op_time(const Graph& graph, OpId id, double bandwidth_bps);

using PolicyFn = Result<Schedule> (*)(const Graph& graph, const PolicyOptions& options);

struct PolicyInfo {
  std::string_view name;
  PolicyFn fn;
  std::string_view description;
};

// All policies in display order: random, fifo, layer, tic, tac, optimal.
std::span<const PolicyInfo> all_policies();
// nullptr when unknown.
const PolicyInfo* find_policy(std::string_view name);
// "random, fifo, layer, tic, tac, optimal" for error messages.
std::string policy_names();

}  // namespace tictac::priority
