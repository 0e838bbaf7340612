#include "priority/sim/compare.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim_test_util.h"

namespace tictac::priority::sim {
namespace {

using testing::build;
using testing::compute;
using testing::recv_bytes;

Graph chain(int layers) {
  std::vector<OpSpec> specs;
  for (int i = 0; i < layers; ++i) {
    specs.push_back(recv_bytes(testing::numbered("w", i), 1000));
    std::vector<std::string> in{testing::numbered("w", i)};
    if (i > 0) in.push_back(testing::numbered("l", i - 1));
    specs.push_back(compute(testing::numbered("l", i), 1e-3, in));
  }
  return build(std::move(specs));
}

SimConfig config() {
  SimConfig c;
  c.bandwidth_bps = 8e6;  // 1 ms per 1000-byte parameter
  c.workers = 2;
  c.iterations = 3;
  c.seed = 5;
  return c;
}

TEST(Compare, EveryPolicyInOrderWithSpeedupAndDistance) {
  std::vector<std::string> progress;
  PolicyOptions opt;
  opt.bandwidth_bps = 8e6;
  Result<CompareResult> r = compare_policies(chain(6), config(), opt,
                                             [&](std::string_view name, int, int, int done, int) {
                                               if (done == 0) progress.emplace_back(name);
                                             });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto policies = all_policies();
  ASSERT_EQ(r->rows.size(), policies.size());
  for (std::size_t i = 0; i < policies.size(); ++i) {
    EXPECT_EQ(r->rows[i].policy, policies[i].name);
    EXPECT_EQ(progress[i], policies[i].name);
    EXPECT_TRUE(r->rows[i].ok) << r->rows[i].policy << ": " << r->rows[i].note;
    EXPECT_GT(r->rows[i].summary.median_time, 0);
  }
  for (const CompareRow& row : r->rows) {
    if (row.policy == "random") {
      EXPECT_DOUBLE_EQ(row.speedup_vs_random, 1);
    }
    if (row.policy == "optimal") {
      EXPECT_DOUBLE_EQ(row.distance_to_optimal, 1);
    }
    // On a chain the layer order is optimal: tic and tac must find it.
    if (row.policy == "tic" || row.policy == "tac") {
      EXPECT_NEAR(row.distance_to_optimal, 1, 1e-9);
    }
  }
}

TEST(Compare, OptimalRefusingALargeGraphIsARowNotAFailure) {
  Result<CompareResult> r = compare_policies(chain(13), config(), PolicyOptions{});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  bool saw_optimal = false;
  for (const CompareRow& row : r->rows) {
    EXPECT_TRUE(std::isnan(row.distance_to_optimal)) << row.policy;
    if (row.policy != "optimal") continue;
    saw_optimal = true;
    EXPECT_FALSE(row.ok);
    EXPECT_FALSE(row.note.empty());
  }
  EXPECT_TRUE(saw_optimal);
}

TEST(Compare, BadConfigIsAnError) {
  SimConfig c = config();
  c.jitter = 2;
  Result<CompareResult> r = compare_policies(chain(2), c, PolicyOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
}

}  // namespace
}  // namespace tictac::priority::sim
