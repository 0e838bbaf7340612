// The paper's model of one worker for one iteration (docs/policies.md, "Makespan model").
//
// One serial channel carries the recvs back to back in the given order starting at time 0 (a
// recv's own inputs, if any, are not modelled, as in dep()). One compute device runs compute
// ops non-preemptively; whenever it is free it starts, among ready ops (all inputs finished),
// the one that became ready first, ties by smaller OpId; it idles only when nothing is ready.
// The makespan is the time the last op (recv or compute) finishes. O((V + E) log V).
//
// recv_order must be a permutation of 0..recvs-1 (positions in graph.recvs()); anything else is
// a caller bug and aborts (TICTAC_CHECK). Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "priority/graph.h"

namespace tictac::priority::policies {

// Times from op_time(graph, id, bandwidth_bps), in seconds.
double single_worker_makespan(const Graph& graph, const std::vector<int>& recv_order,
                              double bandwidth_bps);

// The same model on integer times (op_times_ps in deps.h), so the result is exact; used by the
// optimal search. op_ps is indexed by OpId.
std::int64_t single_worker_makespan_ps(const Graph& graph, std::span<const int> recv_order,
                                       std::span<const std::int64_t> op_ps);

// The model with only a prefix of the order known, for the exact search. Every device decision
// taken before `horizon` is the one the full run takes, provided every recv not in the prefix
// arrives at or after `horizon` (callers pass prefix end + the smallest remaining recv time).
// The run stops before the first decision at or after `horizon`, or when nothing is ready and
// the prefix is exhausted. `prefix` must not repeat a recv (TICTAC_CHECK).
struct PrefixRun {
  std::vector<std::int64_t> finish;  // per OpId: finish time of recvs delivered and of compute
                                     // ops started before the stop; -1 for the others
  std::vector<std::int64_t> ready;   // per OpId: when a compute op still waiting in the ready
                                     // queue at the stop became ready; -1 for the others
  std::int64_t device_free = 0;      // when the device can start its next op
};
PrefixRun run_prefix_ps(const Graph& graph, std::span<const int> prefix,
                        std::span<const std::int64_t> op_ps, std::int64_t horizon);

}  // namespace tictac::priority::policies

namespace tictac::priority {
using policies::single_worker_makespan;
}  // namespace tictac::priority
