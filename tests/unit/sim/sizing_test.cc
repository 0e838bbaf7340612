#include "priority/sim/sizing.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim_test_util.h"

namespace tictac::priority::sim {
namespace {

using testing::build;
using testing::compute;
using testing::recv_bytes;
using testing::recv_time;

TEST(Sizing, RecvSizesUseBytesOrTimeAtTheReferenceBandwidth) {
  const Graph g = build({recv_bytes("a", 100), recv_time("b", 2), compute("c", 1, {"a", "b"})});
  SimConfig c;
  c.bandwidth_bps = 80;
  EXPECT_EQ(recv_sizes(g, c), (std::vector<double>{100, 20}));
  c.size_reference_bps = 800;
  EXPECT_EQ(recv_sizes(g, c), (std::vector<double>{100, 200}));
}

TEST(Sizing, ShardingIsGreedyLargestFirst) {
  EXPECT_EQ(shard_by_bytes(std::vector<double>{1, 5, 3, 3}, 2), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(shard_by_bytes(std::vector<double>{4, 4, 4}, 3), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(shard_by_bytes(std::vector<double>{4, 4, 4}, 1), (std::vector<int>{0, 0, 0}));
  EXPECT_TRUE(shard_by_bytes({}, 2).empty());
}

Graph two_params() {
  return build({recv_bytes("a", 1000), recv_bytes("b", 1000), compute("c", 0.5, {"a"}),
                compute("d", 0.5, {"b", "c"})});
}

TEST(Sizing, SerialLoadOneWorker) {
  SimConfig c;
  c.bandwidth_bps = 8000;
  const SerialLoad s = serial_load(two_params(), c);
  EXPECT_DOUBLE_EQ(s.pull_s, 2);
  EXPECT_DOUBLE_EQ(s.push_s, 0);
  EXPECT_DOUBLE_EQ(s.compute_s, 1);
  EXPECT_DOUBLE_EQ(s.ratio, 2);
  EXPECT_DOUBLE_EQ(s.effective_worker_bps, 8000);
}

TEST(Sizing, SerialLoadCountsSharedPsUplinksAndTraining) {
  SimConfig c;
  c.bandwidth_bps = 8000;
  c.workers = 4;
  c.ps = 2;
  // Each PS sends its 1000 bytes to 4 workers: 4 s, more than a worker's 2 s downlink.
  SerialLoad s = serial_load(two_params(), c);
  EXPECT_DOUBLE_EQ(s.pull_s, 4);
  EXPECT_DOUBLE_EQ(s.effective_worker_bps, 4000);
  c.mode = SimMode::training;
  s = serial_load(two_params(), c);
  EXPECT_DOUBLE_EQ(s.push_s, 4);
  EXPECT_DOUBLE_EQ(s.comm_s, 8);
  EXPECT_DOUBLE_EQ(s.compute_s, 3);  // forward 1 + backward 2
}

TEST(Sizing, CalibrationHitsTheTargetRatio) {
  SimConfig c;
  c.bandwidth_bps = 8000;
  c.workers = 4;
  c.ps = 2;
  c.ps_up_bps = {8000, 4000};
  Result<SimConfig> cal = calibrate_to_ratio(two_params(), c, 1.0);
  ASSERT_TRUE(cal.ok()) << cal.status().to_string();
  EXPECT_NEAR(serial_load(two_params(), *cal).ratio, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(cal->ps_up_bps[0] / cal->ps_up_bps[1], 2);  // proportions kept
  Result<SimConfig> half = calibrate_to_ratio(two_params(), c, 0.5);
  ASSERT_TRUE(half.ok());
  EXPECT_NEAR(serial_load(two_params(), *half).ratio, 0.5, 1e-12);
}

TEST(Sizing, CalibrationKeepsTimeOnlyRecvSizes) {
  const Graph g = build({recv_time("a", 2), compute("c", 1, {"a"})});
  SimConfig c;
  c.bandwidth_bps = 8;
  Result<SimConfig> cal = calibrate_to_ratio(g, c, 1.0);
  ASSERT_TRUE(cal.ok());
  EXPECT_DOUBLE_EQ(cal->bandwidth_bps, 16);
  EXPECT_DOUBLE_EQ(cal->size_reference_bps, 8);
  EXPECT_EQ(recv_sizes(g, *cal), (std::vector<double>{2}));
}

TEST(Sizing, CalibrationErrors) {
  SimConfig c;
  EXPECT_FALSE(calibrate_to_ratio(two_params(), c, 0).ok());
  EXPECT_FALSE(calibrate_to_ratio(two_params(), c, NAN).ok());
  const Graph no_compute = build({recv_bytes("a", 10), compute("c", 0, {"a"})});
  Result<SimConfig> r = calibrate_to_ratio(no_compute, c, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("compute ops take no time"), std::string::npos);
  const Graph no_bytes = build({recv_bytes("a", 0), compute("c", 1, {"a"})});
  r = calibrate_to_ratio(no_bytes, c, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("transfer no bytes"), std::string::npos);
  c.workers = 0;
  EXPECT_FALSE(calibrate_to_ratio(two_params(), c, 1).ok());
}

}  // namespace
}  // namespace tictac::priority::sim
