// TAC, TicTac's timing-aware greedy order (SCHEDULING.md section 5), incremental.
//
// Produces exactly the priorities of tac_reference.h (dense 0,1,2,..., normative key of
// tac_key.h, times in integer picoseconds) without recomputing M, P and M+ every round; the
// algorithm and its cost are in docs/policies.md. Deterministic; thread-safe (no shared state).
// Errors: those of op_times_ps (bad bandwidth, absurd times) and analyze_deps (resource_exhausted
// for graphs with too many distinct dependency sets).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "priority/graph.h"
#include "priority/policies/deps.h"
#include "priority/schedule.h"

namespace tictac::priority::policies {

Result<Schedule> tac_policy(const Graph& graph, const PolicyOptions& options);

// Counters of one run, for the benchmark and the docs.
struct TacStats {
  std::size_t sets = 0;              // distinct dependency sets (classes + singletons)
  std::size_t set_edges = 0;         // edges of the set DAG
  std::uint64_t pick_visits = 0;        // sets updated after picks
  std::uint64_t mplus_updates = 0;      // M+ values lowered because a boundary set's M fell
  std::uint64_t boundary_visits = 0;    // sets visited while growing recvs' boundaries
  std::uint64_t tie_candidates = 0;     // recvs compared on (M+, name) in tied rounds
};

// tac_policy with the analysis memory cap and statistics exposed.
Result<Schedule> tac_policy_with_stats(const Graph& graph, const PolicyOptions& options,
                                       std::uint64_t max_bitset_bytes, TacStats* stats);

}  // namespace tictac::priority::policies
