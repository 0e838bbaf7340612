// The single-worker model of makespan.h on hand-computed cases.
#include <gtest/gtest.h>

#include "priority/policies/deps.h"
#include "priority/policies/makespan.h"
#include "tests/unit/policies/test_graphs.h"

namespace tictac::priority {
namespace {

using testing::build_or_die;
using testing::compute_op;
using testing::recv_op;

TEST(Makespan, DeviceRunsReadyOpsInReadyOrder) {
  // r1 at 1 -> c1 runs 1..6; r2 at 2 -> c2 waits for the device: 6..7.
  const Graph g = build_or_die({recv_op("r1", 1), recv_op("r2", 1), compute_op("c1", {"r1"}, 5),
                                compute_op("c2", {"r2"}, 1)});
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {0, 1}, 1e9), 7);
  // r2 first: c2 1..2, r1 at 2, c1 2..7.
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {1, 0}, 1e9), 7);
}

TEST(Makespan, OpsWithoutInputsStartAtZeroAndOthersQueue) {
  // x (no inputs) runs 0..2 while r1 (at 1) and r2 (at 2) make soon and late ready.
  const Graph g = build_or_die({
      compute_op("x", {}, 2),           // id 0, ready at 0
      compute_op("late", {"r2"}, 10),   // id 1, ready at 2 (r2 arrives second)
      compute_op("soon", {"r1"}, 1),    // id 2, ready at 1
      compute_op("tail", {"soon"}, 5),  // id 3, ready when soon ends
      recv_op("r1", 1), recv_op("r2", 1),
  });
  // x 0..2, soon (ready 1) 2..3, late (ready 2) 3..13, tail (ready 3) 13..18.
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {0, 1}, 1e9), 18);
}

TEST(Makespan, IdleDeviceWaitsForTheNextRecv) {
  const Graph g = build_or_die({recv_op("a", 3), recv_op("b", 4), compute_op("ca", {"a"}, 1),
                                compute_op("cb", {"b", "ca"}, 2)});
  // a at 3, ca 3..4, b at 7, cb 7..9.
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {0, 1}, 1e9), 9);
  // b at 4, a at 7, ca 7..8, cb 8..10.
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {1, 0}, 1e9), 10);
}

TEST(Makespan, RecvsWithoutConsumersAndBytesUseTheChannel) {
  const Graph g = build_or_die({testing::recv_bytes("big", 1000), compute_op("c", {}, 0.5)});
  // 1000 bytes at 8000 bit/s = 1 s on the channel.
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {0}, 8000), 1.0);
}

TEST(Makespan, RecvInputsAreNotModelled) {
  const Graph g = build_or_die({compute_op("pre", {}, 5), recv_op("w", 1), compute_op("c", {"w"}, 1)});
  // pre 0..5; w arrives at 1; c ready at 1, waits: 5..6.
  EXPECT_DOUBLE_EQ(single_worker_makespan(g, {0}, 1e9), 6);
}

TEST(Makespan, PicosecondVersionAgrees) {
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    const Graph g = testing::random_dag(seed, {.recvs = 5, .computes = 12, .tie_heavy = true});
    Result<std::vector<std::int64_t>> ps = policies::op_times_ps(g, 10e9);
    ASSERT_TRUE(ps.ok());
    const std::vector<int> order = {4, 2, 0, 1, 3};
    EXPECT_NEAR(single_worker_makespan(g, order, 10e9),
                static_cast<double>(policies::single_worker_makespan_ps(g, order, *ps)) * 1e-12, 1e-12);
  }
}

// Decisions taken before the horizon are the full run's: every op the prefix replay started
// finishes exactly when it does in the full run.
TEST(Makespan, PrefixReplayAgreesWithTheFullRun) {
  int started = 0;
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    const Graph g = testing::random_dag(seed, {.recvs = 6, .computes = 14, .tie_heavy = seed % 2 == 0});
    Result<std::vector<std::int64_t>> ps = policies::op_times_ps(g, 10e9);
    ASSERT_TRUE(ps.ok());
    const std::vector<int> order = {5, 3, 1, 0, 2, 4};
    const policies::PrefixRun full = policies::run_prefix_ps(g, order, *ps, INT64_MAX);
    std::int64_t makespan = 0;
    for (std::int64_t f : full.finish) makespan = std::max(makespan, f);
    EXPECT_EQ(makespan, policies::single_worker_makespan_ps(g, order, *ps));
    std::int64_t channel = 0;
    for (std::size_t k = 1; k < order.size(); ++k) {
      channel += (*ps)[g.recvs()[order[k - 1]]];
      std::int64_t horizon = INT64_MAX;
      for (std::size_t j = k; j < order.size(); ++j) horizon = std::min(horizon, channel + (*ps)[g.recvs()[order[j]]]);
      const policies::PrefixRun part =
          policies::run_prefix_ps(g, std::span<const int>(order).first(k), *ps, horizon);
      for (OpId id = 0; id < g.size(); ++id) {
        if (part.finish[id] < 0) continue;
        EXPECT_EQ(part.finish[id], full.finish[id]) << "seed " << seed << " prefix " << k << " op " << id;
        started += g.is_recv(id) ? 0 : 1;
      }
    }
  }
  EXPECT_GT(started, 100);
}

TEST(MakespanDeathTest, RejectsAnOrderThatIsNotAPermutation) {
  const Graph g = testing::ab_graph();
  EXPECT_DEATH(single_worker_makespan(g, {0, 0}, 1e9), "permutation");
  EXPECT_DEATH(single_worker_makespan(g, {0}, 1e9), "entries");
}

}  // namespace
}  // namespace tictac::priority
