#include "priority/sim/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace tictac::priority::sim {
namespace {

TEST(UnionLength, DisjointOverlappingNestedAndTouching) {
  EXPECT_DOUBLE_EQ(union_length(std::vector<Interval>{}), 0);
  EXPECT_DOUBLE_EQ(union_length(std::vector<Interval>{{0, 1}, {2, 4}}), 3);
  EXPECT_DOUBLE_EQ(union_length(std::vector<Interval>{{0, 3}, {2, 5}}), 5);
  EXPECT_DOUBLE_EQ(union_length(std::vector<Interval>{{0, 10}, {2, 3}, {4, 5}}), 10);
  EXPECT_DOUBLE_EQ(union_length(std::vector<Interval>{{0, 1}, {1, 2}}), 2);
  // Order of the list does not matter.
  EXPECT_DOUBLE_EQ(union_length(std::vector<Interval>{{6, 7}, {0, 2}, {1, 3}}), 4);
}

TEST(UnionLength, IgnoresReversedAndNonFiniteIntervals) {
  EXPECT_DOUBLE_EQ(union_length(std::vector<Interval>{{5, 1}, {0, 1}}), 1);
  EXPECT_DOUBLE_EQ(union_length(std::vector<Interval>{{0, INFINITY}, {NAN, 3}, {2, 3}}), 1);
}

TEST(OverlapMetrics, PerfectOverlapGivesEfficiencyOne) {
  // comm [0,4], compute [0,4]: N = C = 4, m = 4 = L.
  const OverlapMetrics m = overlap_metrics(std::vector<Interval>{{0, 4}}, std::vector<Interval>{{0, 4}});
  EXPECT_DOUBLE_EQ(m.N, 4);
  EXPECT_DOUBLE_EQ(m.C, 4);
  EXPECT_DOUBLE_EQ(m.U, 8);
  EXPECT_DOUBLE_EQ(m.L, 4);
  EXPECT_DOUBLE_EQ(m.m, 4);
  EXPECT_DOUBLE_EQ(m.E, 1);
  EXPECT_DOUBLE_EQ(m.S, 1);
}

TEST(OverlapMetrics, NoOverlapGivesEfficiencyZero) {
  const OverlapMetrics m = overlap_metrics(std::vector<Interval>{{0, 2}}, std::vector<Interval>{{2, 3}});
  EXPECT_DOUBLE_EQ(m.m, 3);
  EXPECT_DOUBLE_EQ(m.U, 3);
  EXPECT_DOUBLE_EQ(m.E, 0);
  EXPECT_DOUBLE_EQ(m.S, 0.5);
}

TEST(OverlapMetrics, PartialOverlapHandComputed) {
  // The A-first schedule of SCHEDULING.md §5: comm A [0,2], B [2,6]; compute [2,7], [7,8].
  const OverlapMetrics m = overlap_metrics(std::vector<Interval>{{0, 2}, {2, 6}},
                                           std::vector<Interval>{{2, 7}, {7, 8}});
  EXPECT_DOUBLE_EQ(m.N, 6);
  EXPECT_DOUBLE_EQ(m.C, 6);
  EXPECT_DOUBLE_EQ(m.m, 8);
  EXPECT_DOUBLE_EQ(m.E, (12.0 - 8) / (12 - 6));
  EXPECT_DOUBLE_EQ(m.m, m.U - m.E * (m.U - m.L));  // m = U - E (U - L)
}

TEST(OverlapMetrics, MakespanStartsAtTheFirstCommStart) {
  // The reference ignores comm starts; we must not: first start is the comm at 1.
  const OverlapMetrics m = overlap_metrics(std::vector<Interval>{{1, 3}}, std::vector<Interval>{{3, 4}});
  EXPECT_DOUBLE_EQ(m.m, 3);
}

TEST(OverlapMetrics, UndefinedEfficiencyIsNaN) {
  const OverlapMetrics only_compute = overlap_metrics({}, std::vector<Interval>{{0, 2}});
  EXPECT_TRUE(std::isnan(only_compute.E));
  EXPECT_DOUBLE_EQ(only_compute.S, 0);
  const OverlapMetrics nothing = overlap_metrics({}, {});
  EXPECT_DOUBLE_EQ(nothing.m, 0);
  EXPECT_TRUE(std::isnan(nothing.E));
  EXPECT_TRUE(std::isnan(nothing.S));
}

TEST(Straggler, SpreadAndMaxOverMean) {
  const StragglerSpread s = straggler_spread(std::vector<double>{2, 4, 6});
  EXPECT_DOUBLE_EQ(s.spread, 4);
  EXPECT_DOUBLE_EQ(s.max_over_mean, 1.5);
  const StragglerSpread equal = straggler_spread(std::vector<double>{3, 3});
  EXPECT_DOUBLE_EQ(equal.spread, 0);
  EXPECT_DOUBLE_EQ(equal.max_over_mean, 1);
  EXPECT_TRUE(std::isnan(straggler_spread({}).max_over_mean));
  EXPECT_TRUE(std::isnan(straggler_spread(std::vector<double>{0, 0}).max_over_mean));
}

TEST(Stats, MeanMedianPercentileVariance) {
  const std::vector<double> v{5, 1, 4, 2, 3};
  EXPECT_DOUBLE_EQ(mean_of(v), 3);
  EXPECT_DOUBLE_EQ(median_of(v), 3);
  EXPECT_DOUBLE_EQ(median_of(std::vector<double>{4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(percentile_of(v, 95), 5);
  EXPECT_DOUBLE_EQ(percentile_of(v, 40), 2);
  EXPECT_DOUBLE_EQ(percentile_of(v, 100), 5);
  EXPECT_DOUBLE_EQ(variance_of(v), 2);
  // Equal values have exactly zero variance (no rounding residue).
  EXPECT_EQ(variance_of(std::vector<double>{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}), 0.0);
  EXPECT_DOUBLE_EQ(mean_of(std::vector<double>{1, NAN, 3}), 2);
  EXPECT_TRUE(std::isnan(mean_of(std::vector<double>{NAN})));
  EXPECT_TRUE(std::isnan(median_of({})));
  EXPECT_TRUE(std::isnan(percentile_of(v, 0)));
  EXPECT_TRUE(std::isnan(percentile_of(v, 101)));
  EXPECT_TRUE(std::isnan(variance_of({})));
}

}  // namespace
}  // namespace tictac::priority::sim
