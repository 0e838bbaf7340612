// Baseline orders to compare TicTac against (docs/policies.md, "Baselines"). Pure functions of
// the graph (and the seed); thread-safe; they never fail on a built Graph.
//   random: a uniformly random permutation from std::mt19937_64(seed) and our own Fisher-Yates
//           shuffle (std::shuffle's output differs between standard libraries), so the same
//           seed gives the same order everywhere.
//   fifo:   recvs in file order (priority = recv index).
//   layer:  ByteScheduler / P3 style: each recv gets the rank, among compute ops in the graph's
//           topological order, of the first compute op that consumes it; recvs no compute op
//           consumes come last (rank = number of compute ops). Ties allowed.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "priority/graph.h"
#include "priority/schedule.h"

namespace tictac::priority::policies {

// A permutation of 0..n-1, identical on every platform for the same (n, seed).
std::vector<int> seeded_permutation(int n, std::uint64_t seed);

Result<Schedule> random_policy(const Graph& graph, const PolicyOptions& options);
Result<Schedule> fifo_policy(const Graph& graph, const PolicyOptions& options);
Result<Schedule> layer_policy(const Graph& graph, const PolicyOptions& options);

}  // namespace tictac::priority::policies
