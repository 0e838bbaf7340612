// TIC, TicTac's timing-independent order (SCHEDULING.md section 4, docs/policies.md).
//
// Unit oracle (recvs cost 1, compute ops 0), M+ computed once with every recv outstanding,
// recvs sorted by M+ ascending (infinity last); a tie group shares the index of its first
// member (2,2,3,4 -> 0,0,2,3). Deterministic; thread-safe. Errors: those of analyze_deps.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "priority/graph.h"
#include "priority/schedule.h"

namespace tictac::priority::policies {

// M+ per recv (indexed like graph.recvs()) under the unit oracle; INT64_MAX for infinity.
Result<std::vector<std::int64_t>> tic_mplus(const Graph& graph);

Result<Schedule> tic_policy(const Graph& graph, const PolicyOptions& options);

}  // namespace tictac::priority::policies
