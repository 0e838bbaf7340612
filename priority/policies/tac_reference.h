// The straightforward TAC of SCHEDULING.md section 5, used as the test oracle for the
// incremental TAC (tac.h): every round recomputes M, P and M+ for all outstanding recvs from the
// dependency sets of every compute op and gives the head of the normative order (tac_key.h) the
// next dense priority. O(recvs x sum of |dep(op)|) time, O(sum of |dep(op)|) memory: meant for
// graphs of up to a few thousand ops. Times in integer picoseconds (deps.h). Thread-safe.
// Errors: those of op_times_ps (bad bandwidth, absurd times).
#pragma once

#include "common/status.h"
#include "priority/graph.h"
#include "priority/schedule.h"

namespace tictac::priority::policies {

// Schedule named "tac" (it is the same policy).
Result<Schedule> tac_reference_policy(const Graph& graph, const PolicyOptions& options);

}  // namespace tictac::priority::policies
