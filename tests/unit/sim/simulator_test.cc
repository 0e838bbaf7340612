#include "priority/sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "priority/sim/event_queue.h"
#include "common/random.h"
#include "sim_test_util.h"

namespace tictac::priority::sim {
namespace {

using testing::build;
using testing::compute;
using testing::fixed;
using testing::recv_bytes;
using testing::recv_time;

// 8 bits/s: one byte takes one second, and a recv given as `time` t takes t seconds.
SimConfig slow_config() {
  SimConfig c;
  c.bandwidth_bps = 8;
  return c;
}

SimResult run(const Graph& g, const Schedule& s, const SimConfig& c) {
  Result<SimResult> r = simulate(g, s, c);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

// Events of one track and index in iteration 0, in start order.
std::vector<TimelineEvent> track(const SimResult& r, Track t, int index, int iteration = 0) {
  std::vector<TimelineEvent> out;
  for (const TimelineEvent& e : r.timeline) {
    if (e.track == t && e.index == index && e.iteration == iteration) out.push_back(e);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TimelineEvent& a, const TimelineEvent& b) { return a.start < b.start; });
  return out;
}

const TimelineEvent& named(const std::vector<TimelineEvent>& events, const std::string& name) {
  for (const TimelineEvent& e : events) {
    if (e.name == name) return e;
  }
  ADD_FAILURE() << "no event named " << name;
  static const TimelineEvent none;
  return none;
}

Graph chain2() {
  return build({recv_time("w1", 2), recv_time("w2", 2), compute("l1", 1, {"w1"}),
                compute("l2", 1, {"l1", "w2"})});
}

TEST(Simulator, ChainInLayerOrderHandComputed) {
  // w1 [0,2], w2 [2,4]; l1 [2,3]; l2 [4,5] -> 5.
  const SimResult r = run(chain2(), fixed({0, 1}), slow_config());
  ASSERT_EQ(r.iterations.size(), 1u);
  EXPECT_DOUBLE_EQ(r.iterations[0].time, 5);
  const OverlapMetrics& m = r.iterations[0].workers[0].metrics;
  EXPECT_DOUBLE_EQ(m.N, 4);
  EXPECT_DOUBLE_EQ(m.C, 2);
  EXPECT_DOUBLE_EQ(m.m, 5);
  EXPECT_DOUBLE_EQ(m.E, 0.5);  // (6 - 5) / (6 - 4)
  EXPECT_DOUBLE_EQ(m.S, 0.5);
}

TEST(Simulator, ChainInReverseOrderIsSlower) {
  // w2 [0,2], w1 [2,4]; l1 [4,5]; l2 [5,6] -> 6.
  const SimResult r = run(chain2(), fixed({1, 0}), slow_config());
  EXPECT_DOUBLE_EQ(r.iterations[0].time, 6);
  EXPECT_DOUBLE_EQ(r.iterations[0].workers[0].metrics.E, 0);
}

TEST(Simulator, JohnsonExampleFromTheDesign) {
  // SCHEDULING.md §5: A (M=2) unlocks 5, B (M=4) unlocks 1. A first 8, B first 11.
  const Graph g = build({recv_time("A", 2), recv_time("B", 4), compute("opA", 5, {"A"}),
                         compute("opB", 1, {"B"})});
  EXPECT_DOUBLE_EQ(run(g, fixed({0, 1}), slow_config()).iterations[0].time, 8);
  EXPECT_DOUBLE_EQ(run(g, fixed({1, 0}), slow_config()).iterations[0].time, 11);
}

TEST(Simulator, EqualPrioritiesBreakBySmallerRecvIndex) {
  SimConfig c = slow_config();
  c.record_timeline = true;
  const SimResult r = run(chain2(), fixed({3, 3}), c);
  const auto down = track(r, Track::worker_down, 0);
  ASSERT_EQ(down.size(), 2u);
  EXPECT_EQ(down[0].name, "w1");
  EXPECT_EQ(down[1].name, "w2");
}

// 'big' (4 bytes, priority 1) is pending at 0; 'hot' (1 byte, priority 0) is requested only
// when c0 ends at 1, so it can overtake 'big' at a chunk boundary only when chunked.
Graph overtake_graph() {
  return build({recv_bytes("big", 4), compute("c0", 1, {}), recv_time("hot", 1, {"c0"}),
                compute("use", 1, {"hot"}), compute("after", 0, {"big"})});
}

TEST(Simulator, UnchunkedTransferBlocksTheLink) {
  SimConfig c = slow_config();
  c.record_timeline = true;
  const SimResult r = run(overtake_graph(), fixed({1, 0}), c);
  const auto compute_events = track(r, Track::worker_compute, 0);
  EXPECT_DOUBLE_EQ(named(compute_events, "use").start, 5);  // hot waits for big: [4,5]
  EXPECT_DOUBLE_EQ(r.iterations[0].time, 6);
}

TEST(Simulator, ChunkingLetsHighPriorityOvertakeAtAChunkBoundary) {
  SimConfig c = slow_config();
  c.record_timeline = true;
  c.chunk_bytes = 1;
  const SimResult r = run(overtake_graph(), fixed({1, 0}), c);
  const auto down = track(r, Track::worker_down, 0);
  ASSERT_EQ(down.size(), 5u);
  EXPECT_EQ(down[0].name, "big [chunk 1/4]");
  EXPECT_EQ(down[1].name, "hot");
  EXPECT_DOUBLE_EQ(down[1].start, 1);
  EXPECT_EQ(down[4].name, "big [chunk 4/4]");
  const auto compute_events = track(r, Track::worker_compute, 0);
  EXPECT_DOUBLE_EQ(named(compute_events, "use").start, 2);
  EXPECT_DOUBLE_EQ(named(compute_events, "after").start, 5);
  EXPECT_DOUBLE_EQ(r.iterations[0].time, 5);
  EXPECT_EQ(r.chunks, 5u);
}

TEST(Simulator, LastChunkIsTheRemainder) {
  SimConfig c = slow_config();
  c.record_timeline = true;
  c.chunk_bytes = 3;
  const Graph g = build({recv_bytes("p", 7), compute("use", 0, {"p"})});
  const SimResult r = run(g, fixed({0}), c);
  const auto down = track(r, Track::worker_down, 0);
  ASSERT_EQ(down.size(), 3u);
  EXPECT_DOUBLE_EQ(down[2].end - down[2].start, 1);
  EXPECT_DOUBLE_EQ(r.iterations[0].time, 7);
}

TEST(Simulator, WindowBoundsUnacknowledgedChunks) {
  // Two 1-byte recvs, latency 1: with window 1 the second waits for the first's arrival.
  const Graph g = build({recv_bytes("a", 1), recv_bytes("b", 1), compute("use", 0, {"a", "b"})});
  SimConfig c = slow_config();
  c.latency_s = 1;
  EXPECT_DOUBLE_EQ(run(g, fixed({0, 1}), c).iterations[0].time, 4);  // a [0,1]->2, b [2,3]->4
  c.window = 2;
  EXPECT_DOUBLE_EQ(run(g, fixed({0, 1}), c).iterations[0].time, 3);  // b [1,2]->3
}

TEST(Simulator, TwoWorkersShareOnePsUplink) {
  const Graph g = build({recv_bytes("w", 2), compute("c", 1, {"w"})});
  SimConfig c = slow_config();
  c.workers = 2;
  const SimResult r = run(g, fixed({0}), c);
  const IterationResult& it = r.iterations[0];
  EXPECT_DOUBLE_EQ(it.workers[0].time, 3);  // served first (round-robin starts at worker 0)
  EXPECT_DOUBLE_EQ(it.workers[1].time, 5);  // waits for the PS uplink: [2,4], compute [4,5]
  EXPECT_DOUBLE_EQ(it.time, 5);
  EXPECT_DOUBLE_EQ(it.straggler.spread, 2);
  EXPECT_DOUBLE_EQ(it.straggler.max_over_mean, 5.0 / 4.0);
  EXPECT_DOUBLE_EQ(it.workers[1].metrics.m, 3);  // its own first start is 2
  EXPECT_DOUBLE_EQ(r.summary.mean_spread, 2);
}

TEST(Simulator, TwoPsServeTwoWorkersInParallel) {
  // a -> ps0, b -> ps1; both workers need both: the two PS uplinks work in parallel.
  const Graph g = build({recv_bytes("a", 2), recv_bytes("b", 2), compute("c", 1, {"a", "b"})});
  SimConfig c = slow_config();
  c.workers = 2;
  EXPECT_DOUBLE_EQ(run(g, fixed({0, 1}), c).iterations[0].time, 9);  // one PS: 8 s of pulls
  c.ps = 2;
  const SimResult r = run(g, fixed({0, 1}), c);
  EXPECT_EQ(r.shard, (std::vector<int>{0, 1}));
  EXPECT_DOUBLE_EQ(r.iterations[0].workers[0].time, 5);
  EXPECT_DOUBLE_EQ(r.iterations[0].workers[1].time, 5);
}

TEST(Simulator, SlowerLinkSetsTheTransferRate) {
  const Graph g = build({recv_bytes("w", 4), compute("c", 1, {"w"})});
  SimConfig c = slow_config();
  c.worker_down_bps = {4};  // 4 bits/s downlink, 8 bits/s PS uplink: 8 s
  EXPECT_DOUBLE_EQ(run(g, fixed({0}), c).iterations[0].time, 9);
  c.worker_down_bps = {};
  c.ps_up_bps = {16};  // the 8 bits/s downlink is now the bottleneck: 4 s
  EXPECT_DOUBLE_EQ(run(g, fixed({0}), c).iterations[0].time, 5);
}

TEST(Simulator, TrainingChainHandComputed) {
  // Pull w1 [0,1], w2 [1,2]; l1 [1,2], l2 [2,3]; backward l2 [3,5] -> push w2 [5,6];
  // backward l1 [5,7] -> push w1 [7,8]; updates of 0.5 s: w2 [6,6.5], w1 [8,8.5].
  const Graph g = build({recv_bytes("w1", 1), recv_bytes("w2", 1), compute("l1", 1, {"w1"}),
                         compute("l2", 1, {"l1", "w2"})});
  SimConfig c = slow_config();
  c.mode = SimMode::training;
  c.update_time_per_byte = 0.5;
  c.record_timeline = true;
  const SimResult r = run(g, fixed({0, 1}), c);
  EXPECT_DOUBLE_EQ(r.iterations[0].time, 8.5);
  EXPECT_DOUBLE_EQ(r.iterations[0].workers[0].time, 8);
  const OverlapMetrics& m = r.iterations[0].workers[0].metrics;
  EXPECT_DOUBLE_EQ(m.N, 4);
  EXPECT_DOUBLE_EQ(m.C, 6);
  EXPECT_DOUBLE_EQ(m.m, 8);
  const auto up = track(r, Track::worker_up, 0);
  ASSERT_EQ(up.size(), 2u);
  EXPECT_EQ(up[0].name, "w2");
  EXPECT_DOUBLE_EQ(up[0].start, 5);
  const auto updates = track(r, Track::ps_update, 0);
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_DOUBLE_EQ(updates[1].start, 8);
}

TEST(Simulator, TrainingUpdateWaitsForEveryWorkersGradient) {
  // Worker 0 pulls [0,1], f [1,2], backward [2,4], push [4,5]; worker 1 pulls [1,2], f [2,3],
  // backward [3,5], push [5,6] (the PS downlink is free again at 5); update [6,6.5].
  const Graph g = build({recv_bytes("w", 1), compute("f", 1, {"w"})});
  SimConfig c = slow_config();
  c.mode = SimMode::training;
  c.workers = 2;
  c.update_time_per_byte = 0.5;
  const SimResult r = run(g, fixed({0}), c);
  EXPECT_DOUBLE_EQ(r.iterations[0].workers[0].time, 5);
  EXPECT_DOUBLE_EQ(r.iterations[0].workers[1].time, 6);
  EXPECT_DOUBLE_EQ(r.iterations[0].time, 6.5);
}

TEST(Simulator, BackwardFactorScalesBackwardOps) {
  const Graph g = build({recv_bytes("w", 1), compute("f", 1, {"w"})});
  SimConfig c = slow_config();
  c.mode = SimMode::training;
  c.backward_factor = 3;
  EXPECT_DOUBLE_EQ(run(g, fixed({0}), c).iterations[0].time, 1 + 1 + 3 + 1);
}

Graph wide_graph(int recvs) {
  std::vector<OpSpec> specs;
  std::vector<std::string> all;
  for (int i = 0; i < recvs; ++i) {
    specs.push_back(recv_bytes(testing::numbered("p", i), 1 + static_cast<std::uint64_t>(i % 3)));
    specs.push_back(compute(testing::numbered("c", i), 0.5 + 0.25 * (i % 4), {testing::numbered("p", i)}));
    all.push_back(testing::numbered("c", i));
  }
  specs.push_back(compute("join", 0.1, all));
  return build(std::move(specs));
}

std::vector<std::int64_t> identity(int n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) p[i] = i;
  return p;
}

TEST(Simulator, ZeroJitterIsDeterministicAndIterationsRepeat) {
  const Graph g = wide_graph(8);
  SimConfig c = slow_config();
  c.workers = 3;
  c.ps = 2;
  c.iterations = 4;
  const SimResult a = run(g, fixed(identity(8)), c);
  const SimResult b = run(g, fixed(identity(8)), c);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a.iterations[i].time, a.iterations[0].time);
    EXPECT_EQ(a.iterations[i].time, b.iterations[i].time);
  }
  EXPECT_EQ(a.summary.time_variance, 0);
}

TEST(Simulator, JitterIsReproducibleForASeedAndBounded) {
  const Graph g = build({recv_bytes("w", 10), compute("c", 0, {"w"})});
  SimConfig c = slow_config();
  c.iterations = 20;
  c.jitter = 0.2;
  c.seed = 7;
  const SimResult a = run(g, fixed({0}), c);
  const SimResult b = run(g, fixed({0}), c);
  std::vector<double> times;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(a.iterations[i].time, b.iterations[i].time);
    EXPECT_GE(a.iterations[i].time, 8.0);
    EXPECT_LE(a.iterations[i].time, 12.0);
    times.push_back(a.iterations[i].time);
  }
  EXPECT_GT(*std::max_element(times.begin(), times.end()) - *std::min_element(times.begin(), times.end()), 0);
  EXPECT_GT(a.summary.time_variance, 0);
  c.seed = 8;
  EXPECT_NE(run(g, fixed({0}), c).iterations[0].time, a.iterations[0].time);
}

std::vector<std::string> order_on(const SimResult& r, int worker, int iteration) {
  std::vector<std::string> names;
  for (const TimelineEvent& e : track(r, Track::worker_down, worker, iteration)) names.push_back(e.name);
  return names;
}

TEST(Simulator, RandomPolicyDrawsAnOrderPerWorkerAndIteration) {
  const Graph g = wide_graph(8);
  SimConfig c = slow_config();
  c.workers = 2;
  c.iterations = 2;
  c.seed = 3;
  c.shuffle_each_iteration = true;
  c.record_timeline = true;
  const SimResult r = run(g, Schedule{"random", {}}, c);
  EXPECT_NE(order_on(r, 0, 0), order_on(r, 1, 0));
  EXPECT_NE(order_on(r, 0, 0), order_on(r, 0, 1));
  EXPECT_EQ(order_on(r, 0, 0).size(), 8u);
  // Reproducible for the seed.
  const SimResult again = run(g, Schedule{"random", {}}, c);
  EXPECT_EQ(order_on(r, 1, 1), order_on(again, 1, 1));
}

TEST(Simulator, FixedScheduleIsTheSameOnEveryWorker) {
  const Graph g = wide_graph(6);
  SimConfig c = slow_config();
  c.workers = 2;
  c.record_timeline = true;
  const SimResult r = run(g, fixed({5, 4, 3, 2, 1, 0}), c);
  EXPECT_EQ(order_on(r, 0, 0), order_on(r, 1, 0));
  EXPECT_EQ(order_on(r, 0, 0).front(), "p5");
}

// Seeded random DAGs (built here, independent of the generators): on one worker and one PS
// with no latency the worker is never idle with work pending, so L <= m <= U and E in [0, 1].
Graph random_dag(std::uint64_t seed, int recvs, int computes) {
  Rng rng(seed);
  std::vector<OpSpec> specs;
  std::vector<std::string> names;
  for (int i = 0; i < recvs; ++i) {
    specs.push_back(recv_bytes(testing::numbered("r", i), 1 + rng.below(20)));
    names.push_back(specs.back().name);
  }
  for (int i = 0; i < computes; ++i) {
    std::vector<std::string> inputs;
    const int k = 1 + static_cast<int>(rng.below(3));
    for (int j = 0; j < k; ++j) inputs.push_back(names[rng.below(names.size())]);
    specs.push_back(compute(testing::numbered("c", i), rng.uniform(0, 5), inputs));
    names.push_back(specs.back().name);
  }
  return build(std::move(specs));
}

TEST(Simulator, EfficiencyBoundsOnRandomInputs) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    const Graph g = random_dag(seed, 3 + static_cast<int>(seed % 7), 5 + static_cast<int>(seed % 11));
    SimConfig c = slow_config();
    c.chunk_bytes = seed % 3 == 0 ? 4 : 0;
    c.mode = seed % 2 == 0 ? SimMode::training : SimMode::inference;
    Rng prio_rng(seed * 31);
    std::vector<std::int64_t> prio;
    for (std::size_t i = 0; i < g.recvs().size(); ++i) prio.push_back(static_cast<std::int64_t>(prio_rng.below(5)));
    const SimResult r = run(g, fixed(prio), c);
    const OverlapMetrics& m = r.iterations[0].workers[0].metrics;
    SCOPED_TRACE(testing::numbered("seed ", seed));
    EXPECT_GE(m.m, m.L - 1e-9);
    EXPECT_LE(m.m, m.U + 1e-9);
    if (!std::isnan(m.E)) {
      EXPECT_GE(m.E, -1e-9);
      EXPECT_LE(m.E, 1 + 1e-9);
    }
    EXPECT_GT(r.iterations[0].time, 0);
  }
}

TEST(Simulator, SummaryAggregatesIterations) {
  const Graph g = build({recv_bytes("w", 10), compute("c", 1, {"w"})});
  SimConfig c = slow_config();
  c.iterations = 5;
  c.jitter = 0.5;
  c.seed = 11;
  const SimResult r = run(g, fixed({0}), c);
  std::vector<double> times;
  for (const IterationResult& it : r.iterations) times.push_back(it.time);
  EXPECT_DOUBLE_EQ(r.summary.mean_time, mean_of(times));
  EXPECT_DOUBLE_EQ(r.summary.median_time, median_of(times));
  EXPECT_DOUBLE_EQ(r.summary.p95_time, *std::max_element(times.begin(), times.end()));
  EXPECT_DOUBLE_EQ(r.iterations[1].start_offset, r.iterations[0].time);
  ASSERT_EQ(r.summary.workers.size(), 1u);
  EXPECT_DOUBLE_EQ(r.summary.workers[0].time, mean_of(times));
  EXPECT_DOUBLE_EQ(r.summary.mean_E, 0);  // a single chain: nothing overlaps
}

TEST(Simulator, RecvWithoutConsumerStillTransfersAndEmptyGraphTakesNoTime) {
  const Graph g = build({recv_bytes("lonely", 3)});
  EXPECT_DOUBLE_EQ(run(g, fixed({0}), slow_config()).iterations[0].time, 3);
  const Graph empty = build({});
  const SimResult r = run(empty, fixed({}), slow_config());
  EXPECT_DOUBLE_EQ(r.iterations[0].time, 0);
  EXPECT_TRUE(std::isnan(r.iterations[0].workers[0].metrics.E));
}

TEST(Simulator, RejectsAScheduleForAnotherGraph) {
  Result<SimResult> r = simulate(chain2(), fixed({0}), slow_config());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(r.status().message().find("1 priorities but the graph has 2 recvs"), std::string::npos);
}

TEST(Simulator, RejectsAChunkSizeFarTooSmallForTheGraph) {
  const Graph g = build({recv_bytes("huge", 1ull << 40), compute("c", 1, {"huge"})});
  SimConfig c = slow_config();
  c.chunk_bytes = 1;
  Result<SimResult> r = simulate(g, fixed({0}), c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("use a larger chunk size"), std::string::npos);
}

TEST(Simulator, RejectsBadConfig) {
  struct Case {
    const char* what;
    void (*apply)(SimConfig&);
    const char* needle;
  };
  const Case cases[] = {
      {"workers", [](SimConfig& c) { c.workers = 0; }, "workers must be >= 1"},
      {"ps", [](SimConfig& c) { c.ps = -1; }, "ps (parameter servers) must be >= 1"},
      {"iterations", [](SimConfig& c) { c.iterations = 0; }, "iterations"},
      {"window", [](SimConfig& c) { c.window = 0; }, "window"},
      {"bandwidth", [](SimConfig& c) { c.bandwidth_bps = 0; }, "bandwidth must be"},
      {"nan bandwidth", [](SimConfig& c) { c.bandwidth_bps = NAN; }, "bandwidth must be"},
      {"list length", [](SimConfig& c) { c.ps_up_bps = {1, 2}; }, "ps uplink lists 2 bandwidths"},
      {"list value", [](SimConfig& c) { c.worker_down_bps = {-1}; }, "worker downlink must be"},
      {"latency", [](SimConfig& c) { c.latency_s = -1; }, "latency"},
      {"backward", [](SimConfig& c) { c.backward_factor = INFINITY; }, "backward factor"},
      {"update", [](SimConfig& c) { c.update_time_per_byte = -1; }, "update time per byte"},
      {"jitter", [](SimConfig& c) { c.jitter = 1; }, "jitter must be in [0, 1)"},
      {"size ref", [](SimConfig& c) { c.size_reference_bps = -5; }, "size reference"},
  };
  for (const Case& k : cases) {
    SimConfig c = slow_config();
    k.apply(c);
    Result<SimResult> r = simulate(chain2(), fixed({0, 1}), c);
    ASSERT_FALSE(r.ok()) << k.what;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << k.what;
    EXPECT_NE(r.status().message().find(k.needle), std::string::npos) << k.what << ": " << r.status().message();
  }
}

TEST(Simulator, ProgressIsReportedPerIteration) {
  SimConfig c = slow_config();
  c.iterations = 3;
  std::vector<int> seen;
  Result<SimResult> r = simulate(chain2(), fixed({0, 1}), c, [&](int done, int total) {
    EXPECT_EQ(total, 3);
    seen.push_back(done);
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
}

TEST(EventQueue, PopsByTimeThenInsertionOrder) {
  EventQueue<int> q;
  q.push(2.0, 1);
  q.push(1.0, 2);
  q.push(2.0, 3);
  q.push(1.0, 4);
  std::vector<int> out;
  while (!q.empty()) out.push_back(q.pop());
  EXPECT_EQ(out, (std::vector<int>{2, 4, 1, 3}));
}

TEST(Rng, DeterministicBoundedAndPermutes) {
  Rng a(5), b(5);
  for (int i = 0; i < 100; ++i) {
    const double u = a.uniform01();
    EXPECT_EQ(u, b.uniform01());
    EXPECT_GE(u, 0);
    EXPECT_LT(u, 1);
    const std::uint64_t k = a.below(7);
    EXPECT_EQ(k, b.below(7));
    EXPECT_LT(k, 7u);
  }
  std::vector<int> p = a.permutation(10);
  std::sort(p.begin(), p.end());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(p[i], i);
  EXPECT_TRUE(a.permutation(0).empty());
  EXPECT_NE(derive_seed(1, 0, 0, 1), derive_seed(1, 0, 0, 2));
  EXPECT_NE(derive_seed(1, 0, 0, 1), derive_seed(1, 1, 0, 1));
}

}  // namespace
}  // namespace tictac::priority::sim
