// The worked examples of SCHEDULING.md, the baselines and the policy table.
#include <gtest/gtest.h>

#include <set>

#include "priority/generators.h"
#include "priority/policies/baselines.h"
#include "priority/policies/makespan.h"
#include "priority/policies/tac.h"
#include "priority/policies/tic.h"
#include "priority/schedule.h"
#include "tests/unit/policies/test_graphs.h"

namespace tictac::priority {
namespace {

using testing::ab_graph;
using testing::build_or_die;
using testing::chain_graph;
using testing::compute_op;
using testing::recv_op;

Schedule run(std::string_view policy, const Graph& g, PolicyOptions options = {}) {
  const PolicyInfo* info = find_policy(policy);
  EXPECT_NE(info, nullptr) << policy;
  Result<Schedule> s = info->fn(g, options);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return std::move(s).value();
}

TEST(Tic, ChainGivesForwardOrderWithFirstTwoTied) {
  const Graph g = chain_graph(6, 1e-3, 1e-3);
  EXPECT_EQ(run("tic", g).priority, (std::vector<std::int64_t>{0, 0, 2, 3, 4, 5}));
  Result<Graph> gen = make_chain(5, 1 << 20, 1e-3);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  EXPECT_EQ(run("tic", *gen).priority, (std::vector<std::int64_t>{0, 0, 2, 3, 4}));
}

TEST(Tic, TiesShareTheIndexOfTheFirstMember) {
  // M+ values 2,2,3,4 (and one recv no multi-input op needs: infinity, last).
  const Graph g = build_or_die({
      recv_op("a", 1), recv_op("b", 1), recv_op("c", 1), recv_op("d", 1), recv_op("e", 1),
      compute_op("ab", {"a", "b"}, 0), compute_op("abc", {"ab", "c"}, 0),
      compute_op("abcd", {"abc", "d"}, 0), compute_op("only_e", {"e"}, 5),
  });
  Result<std::vector<std::int64_t>> mplus = policies::tic_mplus(g);
  ASSERT_TRUE(mplus.ok());
  const std::int64_t inf = INT64_MAX;
  EXPECT_EQ(*mplus, (std::vector<std::int64_t>{2, 2, 3, 4, inf}));
  EXPECT_EQ(run("tic", g).priority, (std::vector<std::int64_t>{0, 0, 2, 3, 4}));
}

TEST(Tic, IgnoresTimes) {
  const Graph g = build_or_die({recv_op("x", 100), recv_op("y", 1), recv_op("z", 1),
                                compute_op("xy", {"x", "y"}, 50), compute_op("xyz", {"xy", "z"}, 0)});
  EXPECT_EQ(run("tic", g).priority, (std::vector<std::int64_t>{0, 0, 2}));
}

TEST(Tac, AbExamplePicksAFirstAndMakespansAre8And11) {
  const Graph g = ab_graph();
  EXPECT_EQ(run("tac", g).priority, (std::vector<std::int64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {0, 1}, 10e9), 8.0);
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {1, 0}, 10e9), 11.0);
  EXPECT_EQ(run("optimal", g).priority, (std::vector<std::int64_t>{0, 1}));
}

TEST(Tac, ChainGivesForwardOrder) {
  const Graph g = chain_graph(8, 1e-3, 2e-3);
  EXPECT_EQ(send_order(run("tac", g)), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(Tac, EqualKeysFallBackToName) {
  // Two identical independent recvs: same group key, same M+ (infinity): byte-wise name order.
  const Graph g = build_or_die({recv_op("b", 1), recv_op("B", 1), recv_op("a", 1),
                                compute_op("x", {"b"}, 1), compute_op("y", {"B"}, 1),
                                compute_op("z", {"a"}, 1)});
  // "B" (0x42) < "a" (0x61) < "b" (0x62).
  EXPECT_EQ(run("tac", g).priority, (std::vector<std::int64_t>{2, 0, 1}));
}

TEST(Tac, TiesBrokenBySmallerMplus) {
  // r1 and r2 have equal M and P; r2 is needed together with the cheap r3, r1 with the
  // expensive r4, so r2 has the smaller M+.
  const Graph g = build_or_die({
      recv_op("r1", 1), recv_op("r2", 1), recv_op("r3", 1), recv_op("r4", 9),
      compute_op("a", {"r1", "r4"}, 0), compute_op("b", {"r2", "r3"}, 0),
  });
  const std::vector<int> order = send_order(run("tac", g));
  EXPECT_EQ(order.front(), 1);  // r2 (M+ 2) before r1 (M+ 10) and r3 (M+ 2, but name "r3" > "r2")
}

TEST(Baselines, FifoIsFileOrder) {
  const Graph g = chain_graph(4, 1, 1);
  EXPECT_EQ(run("fifo", g).priority, (std::vector<std::int64_t>{0, 1, 2, 3}));
}

TEST(Baselines, LayerIsFirstUseInTopologicalOrder) {
  // File order w_late, w_early; first compute consumer of w_early comes first in topo order.
  const Graph g = build_or_die({
      recv_op("w_late", 1), recv_op("w_early", 1), recv_op("unused", 1),
      compute_op("first", {"w_early"}, 1), compute_op("second", {"first", "w_late", "w_early"}, 1),
  });
  // Compute ranks in topo order: first = 0, second = 1; unused recvs after all (2).
  EXPECT_EQ(run("layer", g).priority, (std::vector<std::int64_t>{1, 0, 2}));
}

TEST(Baselines, RandomIsASeededPermutation) {
  const Graph g = chain_graph(20, 1, 1);
  PolicyOptions o;
  o.seed = 7;
  const Schedule a = run("random", g, o), b = run("random", g, o);
  EXPECT_EQ(a.priority, b.priority);
  std::set<std::int64_t> values(a.priority.begin(), a.priority.end());
  EXPECT_EQ(values.size(), 20u);
  EXPECT_EQ(*values.begin(), 0);
  EXPECT_EQ(*values.rbegin(), 19);
  o.seed = 8;
  EXPECT_NE(run("random", g, o).priority, a.priority);
  // Pinned values: the shuffle is ours, so they must not change across standard libraries.
  EXPECT_EQ(policies::seeded_permutation(5, 1), policies::seeded_permutation(5, 1));
  const std::vector<int> p = policies::seeded_permutation(1000, 42);
  std::vector<int> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
}

TEST(Policies, TableListsAllInDisplayOrder) {
  EXPECT_EQ(policy_names(), "random, fifo, layer, tic, tac, optimal");
  ASSERT_EQ(all_policies().size(), 6u);
  EXPECT_EQ(find_policy("nope"), nullptr);
  for (const PolicyInfo& p : all_policies()) {
    EXPECT_EQ(find_policy(p.name), &p);
    EXPECT_FALSE(p.description.empty());
  }
}

TEST(Policies, EveryPolicyGivesOnePriorityPerRecvAndIsDeterministic) {
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    const Graph g = testing::random_dag(seed, {.recvs = 7, .computes = 15, .recv_inputs = true});
    for (const PolicyInfo& p : all_policies()) {
      PolicyOptions o;
      o.seed = seed;
      const Schedule a = run(p.name, g, o), b = run(p.name, g, o);
      EXPECT_EQ(a.policy, p.name);
      EXPECT_EQ(a.priority.size(), g.recvs().size()) << p.name;
      EXPECT_EQ(a.priority, b.priority) << p.name;
      for (std::int64_t v : a.priority) EXPECT_GE(v, 0) << p.name;
    }
  }
}

TEST(Policies, EmptyAndRecvlessGraphs) {
  const Graph empty = build_or_die({});
  const Graph no_recvs = build_or_die({compute_op("x", {}, 1)});
  for (const PolicyInfo& p : all_policies()) {
    EXPECT_TRUE(run(p.name, empty).priority.empty()) << p.name;
    EXPECT_TRUE(run(p.name, no_recvs).priority.empty()) << p.name;
  }
}

TEST(Policies, TimedPoliciesRejectABadBandwidthForBytesOnlyRecvs) {
  const Graph g = build_or_die({testing::recv_bytes("w", 1000), compute_op("c", {"w"}, 1)});
  PolicyOptions o;
  o.bandwidth_bps = 0;
  for (std::string_view name : {"tac", "optimal"}) {
    Result<Schedule> s = find_policy(name)->fn(g, o);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(s.status().message().find("bandwidth"), std::string::npos) << s.status().message();
  }
  EXPECT_TRUE(find_policy("tic")->fn(g, o).ok());
  EXPECT_TRUE(find_policy("fifo")->fn(g, o).ok());
}

TEST(Policies, AbsurdTimesAreRejected) {
  const Graph g = build_or_die({recv_op("w", 1e300), compute_op("c", {"w"}, 1)});
  Result<Schedule> s = find_policy("tac")->fn(g, {});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("too large"), std::string::npos) << s.status().message();
}

TEST(SendOrder, SortsByPriorityThenIndex) {
  EXPECT_EQ(send_order(Schedule{"x", {3, 0, 0, 1}}), (std::vector<int>{1, 2, 3, 0}));
  EXPECT_TRUE(send_order(Schedule{}).empty());
}

TEST(OpTime, TimeWinsOverBytes) {
  OpSpec both = testing::recv_bytes("w", 1250);
  both.time = 0.5;
  const Graph g = build_or_die({both, testing::recv_bytes("v", 1250)});
  EXPECT_DOUBLE_EQ(op_time(g, 0, 1e4), 0.5);
  EXPECT_DOUBLE_EQ(op_time(g, 1, 1e4), 1.0);  // 1250 * 8 / 1e4
}

}  // namespace
}  // namespace tictac::priority
