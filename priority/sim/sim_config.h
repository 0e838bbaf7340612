// SimConfig: every knob of the event-driven simulator (docs/simulator.md explains the model).
// A plain value; validate() checks it and names the bad field and the accepted range.
// Thread-safe as a value.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tictac::priority::sim {

enum class SimMode : std::uint8_t { inference, training };
std::string_view to_string(SimMode mode);

struct SimConfig {
  int workers = 1;           // W
  int ps = 1;                // K; parameters are sharded over the PSs by bytes
  double bandwidth_bps = 10e9;  // every link unless overridden below
  // Per-link overrides in bits/s: empty = bandwidth_bps for all; else exactly one value per
  // worker (worker_*) or per PS (ps_*).
  std::vector<double> worker_down_bps;
  std::vector<double> worker_up_bps;
  std::vector<double> ps_up_bps;
  std::vector<double> ps_down_bps;
  // A recv given only as 'time' (no 'bytes') is sized time * size_reference_bps / 8 bytes, so
  // its time is its transfer time on a link of that speed; 0 = bandwidth_bps.
  double size_reference_bps = 0;
  double latency_s = 0;          // added to every chunk between leaving the link and arrival
  std::uint64_t chunk_bytes = 0;  // 0 = each parameter is one transfer (the paper's setting)
  int window = 1;                // chunks a sender may have unacknowledged (ack = arrival)
  SimMode mode = SimMode::inference;
  double backward_factor = 2.0;       // training: backward op time = forward time * factor
  double update_time_per_byte = 0;    // training: PS update of a parameter, seconds per byte
  int iterations = 1;
  double jitter = 0;  // each chunk's duration is multiplied by a uniform factor in [1-j, 1+j]
  std::uint64_t seed = 0;
  // The 'random' policy: draw a fresh random order per worker per iteration instead of using
  // the schedule's priorities (the framework-without-ordering baseline).
  bool shuffle_each_iteration = false;
  // Keep every interval of every iteration in SimResult::timeline (for --trace).
  bool record_timeline = false;
};

// invalid_argument naming the field: workers/ps/iterations/window >= 1, bandwidths finite and
// > 0, override lists of the right length, latency/backward_factor/update_time_per_byte finite
// and >= 0, jitter in [0, 1).
Status validate(const SimConfig& config);

// The resolved bandwidth of each link (overrides applied).
struct LinkRates {
  std::vector<double> worker_down, worker_up, ps_up, ps_down;
};
LinkRates link_rates(const SimConfig& config);

}  // namespace tictac::priority::sim
