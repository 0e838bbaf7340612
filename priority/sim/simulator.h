// The event-driven simulator: W workers pull parameters from K parameter servers over links of
// given bandwidth, in the order a Schedule gives, and run the graph's compute ops on one device
// each (docs/simulator.md has the full model). Iterations are synchronous: each starts from an
// empty network after the previous one ended everywhere, so each is simulated from time 0.
//
// simulate() is a pure function of (graph, schedule, config): the same inputs give the same
// result bit for bit (seeded jitter and shuffles use Rng). Errors are invalid_argument
// naming the bad config field or the schedule/graph mismatch. Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "priority/graph.h"
#include "priority/schedule.h"
#include "priority/sim/metrics.h"
#include "priority/sim/sim_config.h"

namespace tictac::priority::sim {

enum class Track : std::uint8_t { worker_down, worker_up, worker_compute, ps_up, ps_down, ps_update };
std::string_view to_string(Track track);

// One busy interval on one resource, in seconds from the start of its iteration. Link tracks
// show link occupancy [start, start + duration]; the chunk arrives `latency` after `end`.
struct TimelineEvent {
  Track track = Track::worker_compute;
  int index = 0;      // worker or PS number
  int iteration = 0;
  double start = 0;
  double end = 0;
  std::string name;   // op name; "<recv>" or "<recv> [chunk i/n]" for transfers
};

struct WorkerIteration {
  OverlapMetrics metrics;  // comm intervals are [chunk start, chunk arrival] of its pulls/pushes
  double time = 0;         // when the worker's last transfer or op ended
};

struct IterationResult {
  double time = 0;          // the synchronous iteration time: when everything ended
  double start_offset = 0;  // sum of the previous iterations' times (for timelines)
  std::vector<WorkerIteration> workers;
  StragglerSpread straggler;  // over workers' `time`
};

struct WorkerSummary {  // means over iterations (E and S skip undefined iterations)
  double N = 0, C = 0, U = 0, L = 0, m = 0, E = 0, S = 0, time = 0;
};

struct SimSummary {
  double mean_time = 0, median_time = 0, p95_time = 0, time_variance = 0;
  double mean_E = 0;            // over workers and iterations, skipping undefined values
  double mean_spread = 0;       // straggler max - min, averaged over iterations
  double mean_max_over_mean = 0;
  double measured_ratio = 0;    // mean over workers and iterations of N / C (NaN if C == 0)
  std::vector<WorkerSummary> workers;
};

struct SimResult {
  std::vector<IterationResult> iterations;
  SimSummary summary;
  std::vector<TimelineEvent> timeline;  // only with config.record_timeline
  std::vector<int> shard;               // PS of each recv (indexed like graph.recvs())
  std::vector<double> recv_bytes;       // bytes of each recv as simulated
  std::uint64_t chunks = 0;             // chunk transfers over all iterations
};

// Called after each iteration with (iterations done, total).
using ProgressFn = std::function<void(int, int)>;

// Errors: invalid config (validate()), schedule.priority not one entry per recv, more than
// 5e7 chunk transfers per iteration (a chunk size far too small for the graph).
Result<SimResult> simulate(const Graph& graph, const Schedule& schedule, const SimConfig& config,
                           const ProgressFn& progress = {});

}  // namespace tictac::priority::sim
