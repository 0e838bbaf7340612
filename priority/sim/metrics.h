// The paper's per-iteration metrics (SCHEDULING.md §6) as pure functions on interval lists.
//
// Intervals are [start, end] in seconds. An interval with end < start, or with a non-finite
// bound, is treated as empty (it adds no busy time and does not move the first start or the
// last end). Undefined ratios (0/0) are NaN; callers print them as "n/a".
// Pure functions on values: thread-safe, no allocation beyond the returned values.
#pragma once

#include <span>
#include <vector>

namespace tictac::priority::sim {

struct Interval {
  double start = 0;
  double end = 0;
};

// Length of the union of the intervals (overlaps counted once).
double union_length(std::span<const Interval> intervals);

// One worker, one iteration.
struct OverlapMetrics {
  double N = 0;  // communication busy time: union of the comm intervals
  double C = 0;  // compute busy time: union of the compute intervals
  double m = 0;  // makespan: last end - first start over BOTH lists (0 when both are empty)
  double U = 0;  // N + C: no overlap at all
  double L = 0;  // max(N, C): perfect overlap
  double E = 0;  // scheduling efficiency (U - m) / (U - L); NaN when U == L
  double S = 0;  // maximum overlap speedup min(N,C) / max(N,C); NaN when both are 0
};

OverlapMetrics overlap_metrics(std::span<const Interval> comm, std::span<const Interval> compute);

// Straggler effect of one synchronous iteration over the workers' iteration times.
struct StragglerSpread {
  double spread = 0;         // max - min (0 for no workers)
  double max_over_mean = 0;  // max / mean; NaN when the mean is 0 or there are no workers
};

StragglerSpread straggler_spread(std::span<const double> times);

// Summary statistics. Empty input gives NaN. NaN values in the input are skipped by mean_of
// (so a mean of E skips iterations where E is undefined); the others expect finite values.
double mean_of(std::span<const double> values);
double median_of(std::span<const double> values);
// Nearest-rank percentile, p in (0, 100]: the ceil(p/100 * n)-th smallest value.
double percentile_of(std::span<const double> values, double p);
// Population variance (divides by n).
double variance_of(std::span<const double> values);

}  // namespace tictac::priority::sim
