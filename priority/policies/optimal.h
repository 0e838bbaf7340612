// optimal: the recv order with the smallest single_worker_makespan (makespan.h), found exactly
// by branch and bound (docs/policies.md, "Exact search").
//
// Times are the integer picoseconds of op_times_ps (deps.h), so the minimum is exact for that
// oracle. Among optimal orders the lexicographically smallest (by recv index) is returned, as
// dense priorities 0..n-1. The search enumerates orders depth-first in index order, replays
// the model exactly as far as a prefix determines it, prunes a prefix whose lower bound cannot
// beat the best order found (initially TAC's) or whose replayed state an earlier prefix of the
// same recvs already reached, and never puts an interchangeable recv (same time and same
// consumer set) before a lower-indexed twin. Usually milliseconds; worst case exponential
// (tens of seconds for some 12-recv graphs), hence the limit. Memory: at most 256 MiB of
// remembered states. Deterministic; thread-safe.
// Errors: invalid_argument for more than 12 recvs; those of op_times_ps.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "priority/graph.h"
#include "priority/schedule.h"

namespace tictac::priority::policies {

inline constexpr int kOptimalMaxRecvs = 12;

struct OptimalStats {
  std::uint64_t nodes = 0;   // prefixes examined
  std::uint64_t leaves = 0;  // complete orders simulated
  std::int64_t makespan_ps = 0;
};

Result<Schedule> optimal_policy(const Graph& graph, const PolicyOptions& options);
Result<Schedule> optimal_policy_with_stats(const Graph& graph, const PolicyOptions& options,
                                           OptimalStats* stats);

}  // namespace tictac::priority::policies
