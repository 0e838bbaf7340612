#include "priority/sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tictac::priority::sim {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool usable(const Interval& iv) {
  return std::isfinite(iv.start) && std::isfinite(iv.end) && iv.end >= iv.start;
}

}  // namespace

double union_length(std::span<const Interval> intervals) {
  std::vector<Interval> sorted;
  sorted.reserve(intervals.size());
  for (const Interval& iv : intervals) {
    if (usable(iv) && iv.end > iv.start) sorted.push_back(iv);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  double total = 0;
  bool open = false;
  double cur_start = 0;
  double cur_end = 0;
  for (const Interval& iv : sorted) {
    if (open && iv.start <= cur_end) {
      cur_end = std::max(cur_end, iv.end);
      continue;
    }
    if (open) total += cur_end - cur_start;
    cur_start = iv.start;
    cur_end = iv.end;
    open = true;
  }
  if (open) total += cur_end - cur_start;
  return total;
}

OverlapMetrics overlap_metrics(std::span<const Interval> comm, std::span<const Interval> compute) {
  OverlapMetrics r;
  r.N = union_length(comm);
  r.C = union_length(compute);
  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  for (std::span<const Interval> list : {comm, compute}) {
    for (const Interval& iv : list) {
      if (!usable(iv)) continue;
      first = std::min(first, iv.start);
      last = std::max(last, iv.end);
    }
  }
  r.m = first <= last ? last - first : 0;
  r.U = r.N + r.C;
  r.L = std::max(r.N, r.C);
  r.E = r.U == r.L ? kNaN : (r.U - r.m) / (r.U - r.L);
  r.S = r.L == 0 ? kNaN : std::min(r.N, r.C) / r.L;
  return r;
}

StragglerSpread straggler_spread(std::span<const double> times) {
  StragglerSpread s;
  if (times.empty()) {
    s.max_over_mean = kNaN;
    return s;
  }
  const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
  double sum = 0;
  for (double t : times) sum += t;
  const double mean = sum / static_cast<double>(times.size());
  s.spread = *hi - *lo;
  s.max_over_mean = mean == 0 ? kNaN : *hi / mean;
  return s;
}

double mean_of(std::span<const double> values) {
  double sum = 0;
  std::size_t n = 0;
  for (double v : values) {
    if (std::isnan(v)) continue;
    sum += v;
    ++n;
  }
  return n == 0 ? kNaN : sum / static_cast<double>(n);
}

double median_of(std::span<const double> values) {
  if (values.empty()) return kNaN;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double percentile_of(std::span<const double> values, double p) {
  if (values.empty() || !(p > 0) || p > 100) return kNaN;
  std::vector<double> v(values.begin(), values.end());
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

double variance_of(std::span<const double> values) {
  if (values.empty()) return kNaN;
  // Welford: equal values give exactly 0 (a plain sum / n can round away from the value).
  double mean = 0;
  double m2 = 0;
  std::size_t n = 0;
  for (double v : values) {
    ++n;
    const double delta = v - mean;
    mean += delta / static_cast<double>(n);
    m2 += delta * (v - mean);
  }
  return m2 / static_cast<double>(n);
}

}  // namespace tictac::priority::sim
