// Sizing and placement helpers shared by the simulator and the CLI: bytes per recv, sharding
// of parameters over PSs, the serial comm/compute ratio and bandwidth calibration for a target
// ratio (SCHEDULING.md §6: "any comparison with the paper must say which a it ran at").
// Pure functions; thread-safe.
#pragma once

#include <span>
#include <vector>

#include "common/status.h"
#include "priority/graph.h"
#include "priority/sim/sim_config.h"

namespace tictac::priority::sim {

// Bytes of each recv (indexed like graph.recvs()): 'bytes' when given, else
// time * reference / 8 with reference = config.size_reference_bps or, when 0, bandwidth_bps.
std::vector<double> recv_sizes(const Graph& graph, const SimConfig& config);

// PS of each parameter: greedy largest-first (ties: smaller index) onto the least-loaded PS
// (ties: smaller PS number). Deterministic.
std::vector<int> shard_by_bytes(std::span<const double> bytes, int ps);

// Serial totals for one worker in one iteration at the config's bandwidths.
struct SerialLoad {
  double pull_s = 0;     // busiest link of the pull phase: max over worker downlinks
                         // (all bytes) and PS uplinks (W x that PS's bytes)
  double push_s = 0;     // training only, the same over worker uplinks and PS downlinks
  double comm_s = 0;     // pull_s + push_s
  double compute_s = 0;  // forward times, plus backward (x backward_factor) in training
  double ratio = 0;      // comm_s / compute_s (NaN when compute_s == 0)
  double effective_worker_bps = 0;  // total bytes * 8 / pull_s: a worker's share of the network
};
SerialLoad serial_load(const Graph& graph, const SimConfig& config);

// Returns the config with every link bandwidth (bandwidth_bps and all overrides) scaled by one
// factor so that serial_load(...).ratio == target, and size_reference_bps pinned to the
// uncalibrated value so recvs given only as time keep their size. Errors (invalid_argument):
// target not finite and > 0, a graph without compute time, or without bytes to transfer.
Result<SimConfig> calibrate_to_ratio(const Graph& graph, SimConfig config, double target);

}  // namespace tictac::priority::sim
