// The exact search: against brute force, against every heuristic, and its limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "priority/policies/deps.h"
#include "priority/policies/makespan.h"
#include "priority/policies/optimal.h"
#include "priority/schedule.h"
#include "tests/unit/policies/test_graphs.h"

namespace tictac::priority {
namespace {

using policies::single_worker_makespan_ps;

std::int64_t makespan_ps(const Graph& g, const Schedule& s, const PolicyOptions& o = {}) {
  Result<std::vector<std::int64_t>> ps = policies::op_times_ps(g, o.bandwidth_bps);
  EXPECT_TRUE(ps.ok());
  return single_worker_makespan_ps(g, send_order(s), *ps);
}

TEST(Optimal, EqualsBruteForceAndIsLexicographicallySmallest) {
  std::size_t orders = 0;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    testing::RandomDagOptions o;
    o.recvs = 2 + static_cast<int>(seed % 6);  // 2..7 recvs: 5040 orders at most
    o.computes = 4 + static_cast<int>(seed % 9);
    o.tie_heavy = seed % 2 == 1;
    const Graph g = testing::random_dag(1000 + seed, o);
    Result<std::vector<std::int64_t>> ps = policies::op_times_ps(g, 10e9);
    ASSERT_TRUE(ps.ok());
    std::vector<int> order(g.recvs().size());
    std::iota(order.begin(), order.end(), 0);
    std::int64_t best = INT64_MAX;
    std::vector<int> best_order;
    do {
      ++orders;
      const std::int64_t ms = single_worker_makespan_ps(g, order, *ps);
      if (ms < best) {
        best = ms;
        best_order = order;
      }
    } while (std::next_permutation(order.begin(), order.end()));
    policies::OptimalStats stats;
    Result<Schedule> opt = policies::optimal_policy_with_stats(g, {}, &stats);
    ASSERT_TRUE(opt.ok()) << opt.status().to_string();
    EXPECT_EQ(stats.makespan_ps, best) << "seed " << seed;
    EXPECT_EQ(send_order(*opt), best_order) << "seed " << seed;
  }
  EXPECT_EQ(orders, 7u * (2 + 6 + 24 + 120) + 6u * (720 + 5040));  // 2..5 recvs 7 times, 6..7 six
}

TEST(Optimal, NeverWorseThanAnyHeuristic) {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    testing::RandomDagOptions o;
    o.recvs = 3 + static_cast<int>(seed % 6);  // up to 8 recvs
    o.computes = 6 + static_cast<int>(seed % 15);
    o.shape = static_cast<testing::Shape>(seed % 4);
    o.tie_heavy = seed % 3 == 0;
    const Graph g = testing::random_dag(2000 + seed, o);
    PolicyOptions po;
    po.seed = seed;
    Result<Schedule> opt = find_policy("optimal")->fn(g, po);
    ASSERT_TRUE(opt.ok()) << opt.status().to_string();
    const std::int64_t best = makespan_ps(g, *opt);
    const double best_s = single_worker_makespan(g, send_order(*opt), po.bandwidth_bps);
    for (std::string_view name : {"tic", "tac", "fifo", "layer", "random"}) {
      Result<Schedule> h = find_policy(name)->fn(g, po);
      ASSERT_TRUE(h.ok());
      EXPECT_LE(best, makespan_ps(g, *h)) << name << " seed " << seed;
      // The same in seconds, up to the picosecond rounding of the exact oracle.
      EXPECT_LE(best_s, single_worker_makespan(g, send_order(*h), po.bandwidth_bps) + 1e-9)
          << name << " seed " << seed;
    }
  }
}

TEST(Optimal, RefusesMoreThanTwelveRecvs) {
  const Graph g = testing::chain_graph(13, 1, 1);
  Result<Schedule> s = find_policy("optimal")->fn(g, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(s.status().message(),
            "optimal is exact and limited to 12 recvs; this graph has 13; use tac");
  EXPECT_TRUE(find_policy("optimal")->fn(testing::chain_graph(12, 1, 1), {}).ok());
}

// par-12: 12 equal parameters, one op each, joined at the end: every order is optimal, the
// bound proves it at once.
TEST(Optimal, ParallelTwelveIsSolvedByTheBound) {
  std::vector<OpSpec> specs;
  std::vector<std::string> outs;
  for (int i = 0; i < 12; ++i) {
    specs.push_back(testing::recv_bytes(testing::numbered("p", i), 2 << 20));
    specs.push_back(testing::compute_op(testing::numbered("op", i), {testing::numbered("p", i)}, 1e-3));
    outs.push_back(testing::numbered("op", i));
  }
  specs.push_back(testing::compute_op("join", outs, 1e-3));
  const Graph g = testing::build_or_die(specs);
  for (double bw : {10e9, 1e12}) {  // communication-bound, then compute-bound
    PolicyOptions o;
    o.bandwidth_bps = bw;
    policies::OptimalStats stats;
    Result<Schedule> s = policies::optimal_policy_with_stats(g, o, &stats);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(send_order(*s), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    EXPECT_LE(stats.nodes, 100u) << "bandwidth " << bw;
  }
}

// Twelve interchangeable recvs (same time, same consumers): only the index order is explored.
TEST(Optimal, InterchangeableRecvsArePruned) {
  std::vector<OpSpec> specs;
  std::vector<std::string> all;
  for (int i = 0; i < 12; ++i) {
    specs.push_back(testing::recv_op(testing::numbered("w", i), 1e-3));
    all.push_back(testing::numbered("w", i));
  }
  specs.push_back(testing::compute_op("a", all, 1e-3));
  specs.push_back(testing::compute_op("b", all, 2e-3));
  const Graph g = testing::build_or_die(specs);
  policies::OptimalStats stats;
  ASSERT_TRUE(policies::optimal_policy_with_stats(g, {}, &stats).ok());
  EXPECT_LE(stats.nodes, 13u);
}

TEST(Heuristics, TacBeatsRandomOnAverage) {
  double tac_sum = 0, random_sum = 0;
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    testing::RandomDagOptions o;
    o.recvs = 8 + static_cast<int>(seed % 8);
    o.computes = 20 + static_cast<int>(seed % 20);
    o.shape = static_cast<testing::Shape>(seed % 4);
    const Graph g = testing::random_dag(3000 + seed, o);
    PolicyOptions po;
    po.seed = seed;
    Result<Schedule> tac = find_policy("tac")->fn(g, po);
    Result<Schedule> rnd = find_policy("random")->fn(g, po);
    ASSERT_TRUE(tac.ok() && rnd.ok());
    tac_sum += single_worker_makespan(g, send_order(*tac), po.bandwidth_bps);
    random_sum += single_worker_makespan(g, send_order(*rnd), po.bandwidth_bps);
  }
  EXPECT_LT(tac_sum / 100, random_sum / 100);
}

}  // namespace
}  // namespace tictac::priority
