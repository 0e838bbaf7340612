// The incremental TAC must give exactly the reference's priorities.
#include <gtest/gtest.h>

#include "priority/generators.h"
#include "priority/policies/tac.h"
#include "priority/policies/tac_reference.h"
#include "tests/unit/policies/test_graphs.h"

namespace tictac::priority {
namespace {

using policies::tac_policy;
using policies::tac_reference_policy;

void expect_same(const Graph& g, const std::string& what, PolicyOptions o = {}) {
  Result<Schedule> fast = tac_policy(g, o);
  Result<Schedule> ref = tac_reference_policy(g, o);
  ASSERT_TRUE(fast.ok()) << what << ": " << fast.status().to_string();
  ASSERT_TRUE(ref.ok()) << what << ": " << ref.status().to_string();
  ASSERT_EQ(fast->priority, ref->priority) << what;
  EXPECT_EQ(fast->policy, "tac");
  // Dense 0..n-1.
  std::vector<bool> seen(g.recvs().size(), false);
  for (std::int64_t p : fast->priority) {
    ASSERT_TRUE(p >= 0 && p < static_cast<std::int64_t>(seen.size()) && !seen[p]) << what;
    seen[p] = true;
  }
}

TEST(TacProperty, MatchesReferenceOnWorkedExamples) {
  expect_same(testing::ab_graph(), "A/B");
  expect_same(testing::chain_graph(12, 1e-3, 1e-3), "chain equal");
  expect_same(testing::chain_graph(12, 1e-3, 0), "chain zero compute");
  expect_same(testing::chain_graph(12, 0, 1e-3), "chain zero recv");
}

TEST(TacProperty, MatchesReferenceOnSeededRandomDags) {
  int graphs = 0;
  for (std::uint64_t seed = 0; seed < 80; ++seed) {
    for (int shape = 0; shape < 4; ++shape) {
      testing::RandomDagOptions o;
      o.shape = static_cast<testing::Shape>(shape);
      o.recvs = 2 + static_cast<int>(seed % 14);
      o.computes = 3 + static_cast<int>((seed * 7) % 40);
      o.tie_heavy = seed % 2 == 0;
      o.use_bytes = seed % 3 == 0;
      o.recv_inputs = seed % 5 == 0;
      const Graph g = testing::random_dag(seed * 4 + shape, o);
      expect_same(g, "seed " + std::to_string(seed) + " shape " + std::to_string(shape));
      ++graphs;
    }
  }
  EXPECT_EQ(graphs, 320);
}

TEST(TacProperty, MatchesReferenceOnGeneratedGraphs) {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    Result<Graph> r = make_random_dag(40 + static_cast<int>(seed) * 5, 5 + static_cast<int>(seed), seed);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    expect_same(*r, "make_random_dag " + std::to_string(seed));
    Result<Graph> inc = make_inception_like(2, 2 + static_cast<int>(seed % 3), seed);
    ASSERT_TRUE(inc.ok()) << inc.status().to_string();
    expect_same(*inc, "make_inception_like " + std::to_string(seed));
    Result<Graph> lay = make_layered(600, 30, seed);
    ASSERT_TRUE(lay.ok()) << lay.status().to_string();
    expect_same(*lay, "make_layered " + std::to_string(seed));
  }
  Result<Graph> par = make_par32();
  ASSERT_TRUE(par.ok());
  expect_same(*par, "par-32");
  Result<Graph> seq = make_seq32();
  ASSERT_TRUE(seq.ok());
  expect_same(*seq, "seq-32");
  PolicyOptions slow;
  slow.bandwidth_bps = 1e6;
  expect_same(*par, "par-32 at 1 Mbit/s", slow);
}

TEST(TacProperty, StatsCountTheWork) {
  Result<Graph> lay = make_layered(2000, 20, 3);
  ASSERT_TRUE(lay.ok());
  policies::TacStats stats;
  ASSERT_TRUE(policies::tac_policy_with_stats(*lay, {}, policies::kDefaultDepBitsetBytes, &stats).ok());
  EXPECT_GE(stats.sets, 20u);
  EXPECT_GT(stats.pick_visits, 0u);
  // par-32 ties every recv on the primary key: M+ must be evaluated.
  Result<Graph> par = make_par32();
  ASSERT_TRUE(par.ok());
  ASSERT_TRUE(policies::tac_policy_with_stats(*par, {}, policies::kDefaultDepBitsetBytes, &stats).ok());
  EXPECT_GT(stats.tie_candidates, 0u);
  EXPECT_GT(stats.mplus_updates, 0u);
}

TEST(TacProperty, ReportsTheAnalysisMemoryCap) {
  Result<Graph> lay = make_layered(2000, 200, 3);
  ASSERT_TRUE(lay.ok());
  Result<Schedule> s = policies::tac_policy_with_stats(*lay, {}, 64, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(s.status().message().find("fifo or layer"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace tictac::priority
