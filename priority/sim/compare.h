// compare_policies: runs every policy from all_policies() on one graph and one simulator
// setting and lines the results up (what `tictac compare` prints).
//
// A policy that cannot run on the graph (optimal refuses more than 12 recvs) gives a row with
// ok = false and its reason in `note`; it does not fail the comparison. Speedup is against the
// 'random' row (median_random / median_policy) and distance against the 'optimal' row
// (median_policy / median_optimal); both are NaN when that row is missing. Errors: the config
// (validate()) or a simulation error. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "priority/graph.h"
#include "priority/schedule.h"
#include "priority/sim/simulator.h"

namespace tictac::priority::sim {

struct CompareRow {
  std::string policy;
  bool ok = false;
  std::string note;  // why the policy did not run
  SimSummary summary;
  double speedup_vs_random = 0;    // NaN when random did not run
  double distance_to_optimal = 0;  // NaN when optimal did not run
};

struct CompareResult {
  std::vector<CompareRow> rows;  // in all_policies() order
};

// Progress: (policy name, policy index, policy count, iterations done, iterations total);
// called before each policy (iterations done = 0) and after each of its iterations.
using CompareProgressFn = std::function<void(std::string_view, int, int, int, int)>;

// `config.shuffle_each_iteration` is set for the 'random' policy and cleared for the others;
// `options` are passed to every policy (its bandwidth is TAC's oracle for recvs given in bytes).
Result<CompareResult> compare_policies(const Graph& graph, const SimConfig& config,
                                       const PolicyOptions& options,
                                       const CompareProgressFn& progress = {});

}  // namespace tictac::priority::sim
