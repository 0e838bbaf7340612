// Collectives in flight together (collective_scheduler.h, Group::SeqScope):
//  - the scheduler's contract without a network: tickets in posting order, FIFO start among
//    equal priorities, at most `concurrency` concurrent tasks, a fence runs alone; the smallest
//    priority starts first and the oldest task has a spare slot (counter-check: concurrency 1
//    keeps posting order);
//  - over real TCP on loopback: a big low-priority all-reduce posted first and a small
//    high-priority one posted second; the small one must finish first AND the big one may move
//    only a small share of its remaining reduce-scatter data meanwhile (counted by the big
//    one's reduce function, no clock). Counter-checks: with one collective at a time
//    (concurrency 1) or without priorities (TICTAC_PRIORITY=0's enforce_priority = false) the
//    same criterion fails;
//  - many concurrent all-reduces with fences in between, each rank with a different
//    concurrency, all matching across ranks and equal to the sums computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <latch>
#include <thread>

#include "integration/group/collective_scheduler.h"
#include "integration/group/group.h"
#include "transport/bootstrap/in_memory_store.h"

namespace tictac::group {
namespace {

using namespace std::chrono_literals;

// --- the scheduler alone ---------------------------------------------------------------------

// A gate tasks block on until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard l(mu);
      open = true;
    }
    cv.notify_all();
  }
};

// Waits until `pred` holds (bounded: a broken scheduler fails instead of hanging).
template <typename Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 20000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(CollectiveScheduler, FifoStartBoundedConcurrencyAndFences) {
  CollectiveScheduler s("test-coll", 3);
  Gate gate;
  std::mutex mu;
  std::vector<std::uint64_t> started;
  std::atomic<int> running{0}, peak{0}, fence_saw_others{0};
  auto task = [&](bool fence) {
    return [&, fence](std::uint64_t ticket) {
      const int now = ++running;
      int p = peak.load();
      while (now > p && !peak.compare_exchange_weak(p, now)) {
      }
      if (fence && now != 1) ++fence_saw_others;
      {
        std::lock_guard l(mu);
        started.push_back(ticket);
      }
      gate.wait();
      --running;
    };
  };
  // 5 concurrent, a fence, 2 concurrent.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.post(true, task(false)));
  ASSERT_TRUE(s.post(false, task(true)));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(s.post(true, task(false)));
  // Exactly the first 3 start while the gate is shut.
  ASSERT_TRUE(eventually([&] { return running.load() == 3; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(running.load(), 3);
  std::vector<std::uint64_t> first_three;
  {
    std::lock_guard l(mu);
    first_three = started;
  }
  gate.release();
  s.shutdown();
  EXPECT_EQ(s.finished(), 8u);
  EXPECT_EQ(peak.load(), 3);
  EXPECT_EQ(s.max_running(), 3);
  EXPECT_EQ(fence_saw_others.load(), 0) << "a fence ran beside another task";
  ASSERT_EQ(started.size(), 8u);
  // Tickets are the posting indexes, each given once; while the gate was shut exactly the
  // first three (0, 1, 2) had started (FIFO start; which thread logs first is not ordered).
  std::sort(started.begin(), started.end());
  for (std::size_t i = 0; i < started.size(); ++i) EXPECT_EQ(started[i], i);
  std::sort(first_three.begin(), first_three.end());
  EXPECT_EQ(first_three, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_FALSE(s.post(true, [](std::uint64_t) {}));
}

TEST(CollectiveScheduler, ConcurrencyOneIsSerial) {
  CollectiveScheduler s("test-coll", 1);
  std::vector<std::uint64_t> seen;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(s.post(i % 3 != 0, [&seen](std::uint64_t t) { seen.push_back(t); }));
  }
  s.shutdown();
  ASSERT_EQ(seen.size(), 50u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(s.max_running(), 1);
}

TEST(CollectiveScheduler, ConfiguredConcurrencyNamesABadValue) {
  ::setenv("TICTAC_COLL_CONCURRENCY", "0", 1);
  Result<int> bad = CollectiveScheduler::configured_concurrency();
  ::unsetenv("TICTAC_COLL_CONCURRENCY");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_COLL_CONCURRENCY"), std::string::npos);
  Result<int> def = CollectiveScheduler::configured_concurrency();
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(*def, CollectiveScheduler::kDefaultConcurrency);
}

// Per-task gates, opened one at a time, and the order in which tasks started.
struct Gates {
  explicit Gates(int n) : gates(static_cast<std::size_t>(n)) {}
  std::vector<Gate> gates;
  std::mutex mu;
  std::vector<std::uint64_t> started;
  std::atomic<int> running{0};
  CollectiveScheduler::Task task() {
    return [this](std::uint64_t ticket) {
      ++running;
      {
        std::lock_guard l(mu);
        started.push_back(ticket);
      }
      gates[ticket].wait();
      --running;
    };
  }
  // The start order; the first `racing` entries started together (their order is the threads').
  std::vector<std::uint64_t> order(std::size_t racing = 2) {
    std::lock_guard l(mu);
    std::vector<std::uint64_t> o = started;
    std::sort(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(std::min(racing, o.size())));
    return o;
  }
};

// Starts tasks 0 and 1 (priority `p`) through `s` (concurrency 2) and waits until both run.
void fill_both_slots(CollectiveScheduler& s, Gates& g, std::int64_t p) {
  ASSERT_TRUE(s.post(true, p, g.task()));
  ASSERT_TRUE(s.post(true, p, g.task()));
  ASSERT_TRUE(eventually([&] { return g.running.load() == 2; }));
}

TEST(CollectiveScheduler, AFreedSlotGoesToTheSmallestPriority) {
  CollectiveScheduler s("test-coll", 2);
  Gates g(4);
  fill_both_slots(s, g, 1);
  ASSERT_TRUE(s.post(true, 9, g.task()));  // 2: older
  ASSERT_TRUE(s.post(true, 5, g.task()));  // 3: smaller priority (not below the running 1s)
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(g.order().size(), 2u);
  g.gates[1].release();
  ASSERT_TRUE(eventually([&] { return g.order().size() == 3; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(g.order(), (std::vector<std::uint64_t>{0, 1, 3}));
  g.gates[0].release();
  ASSERT_TRUE(eventually([&] { return g.order().size() == 4; }));
  for (auto& gate : g.gates) gate.release();
  s.shutdown();
  EXPECT_EQ(s.max_running(), 2);
}

TEST(CollectiveScheduler, AMoreUrgentTaskNeedsNoSlotUpToTheUrgentLimit) {
  CollectiveScheduler s("test-coll", 2);
  const int limit = s.urgent_limit();
  ASSERT_EQ(limit, CollectiveScheduler::kUrgentLimit);
  Gates g(limit + 2);
  fill_both_slots(s, g, 1000);
  ASSERT_TRUE(s.post(true, 999, g.task()));  // 2: more urgent than all running: starts now
  ASSERT_TRUE(eventually([&] { return g.order().size() == 3; }));
  ASSERT_TRUE(s.post(true, 999, g.task()));  // 3: not more urgent than 2: waits
  // Each next one more urgent than every running task: they start until `limit` run.
  for (int k = 0; k < limit - 3; ++k) {
    ASSERT_TRUE(s.post(true, 900 - k, g.task()));
    ASSERT_TRUE(eventually([&] { return g.running.load() == 4 + k; })) << k;
  }
  ASSERT_TRUE(s.post(true, -1, g.task()));  // the most urgent of all, but the limit is reached
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(g.running.load(), limit);
  const std::vector<std::uint64_t> order = g.order();
  EXPECT_EQ(std::count(order.begin(), order.end(), 3u), 0) << "3 is not more urgent than 2";
  for (auto& gate : g.gates) gate.release();
  s.shutdown();
  EXPECT_EQ(s.finished(), static_cast<std::uint64_t>(limit) + 2);
  EXPECT_EQ(s.max_running(), limit);
}

TEST(CollectiveScheduler, TheOldestTaskHasASpareSlot) {
  CollectiveScheduler s("test-coll", 2);
  Gates g(5);
  fill_both_slots(s, g, 9);
  ASSERT_TRUE(s.post(true, 9, g.task()));  // 2: the oldest pending from here on
  ASSERT_TRUE(s.post(true, 1, g.task()));  // 3: urgent, starts
  ASSERT_TRUE(s.post(true, 1, g.task()));  // 4: waits (not more urgent than 3)
  ASSERT_TRUE(eventually([&] { return g.order().size() == 3; }));
  g.gates[0].release();
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(g.order().size(), 3u);  // 1 and 3 run: both slots; 2 is not older than 1
  g.gates[1].release();
  // 4 takes the freed slot (smaller priority); then both running tasks (3, 4) are younger than
  // 2, which starts in the spare slot although both slots are taken.
  ASSERT_TRUE(eventually([&] { return g.order().size() == 5; }));
  std::vector<std::uint64_t> last = g.order();
  std::sort(last.begin() + 3, last.end());
  EXPECT_EQ(last, (std::vector<std::uint64_t>{0, 1, 3, 2, 4}));
  EXPECT_EQ(g.running.load(), 3);
  EXPECT_EQ(s.max_running(), 3);
  for (auto& gate : g.gates) gate.release();
  s.shutdown();
  EXPECT_EQ(s.finished(), 5u);
}

TEST(CollectiveScheduler, CounterCheckConcurrencyOneIgnoresPriorities) {
  CollectiveScheduler s("test-coll", 1);
  std::vector<std::uint64_t> seen;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(s.post(true, 20 - i, [&seen](std::uint64_t t) { seen.push_back(t); }));
  }
  s.shutdown();
  ASSERT_EQ(seen.size(), 20u);
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i);
  EXPECT_EQ(s.max_running(), 1);
}

TEST(CollectiveScheduler, APriorityNeverJumpsAFence) {
  CollectiveScheduler s("test-coll", 3);
  Gates g(3);
  ASSERT_TRUE(s.post(true, 9, g.task()));   // 0
  ASSERT_TRUE(s.post(false, 9, g.task()));  // 1: a fence
  ASSERT_TRUE(s.post(true, 0, g.task()));   // 2: highest priority, behind the fence
  ASSERT_TRUE(eventually([&] { return g.running.load() == 1; }));
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(g.order(), (std::vector<std::uint64_t>{0}));
  for (auto& gate : g.gates) gate.release();
  s.shutdown();
  EXPECT_EQ(g.order(), (std::vector<std::uint64_t>{0, 1, 2}));
}

// --- over loopback TCP -----------------------------------------------------------------------

std::vector<std::unique_ptr<Group>> make_groups(bootstrap::Store& store, int size,
                                                bool enforce_priority, const std::string& key) {
  Result<transport::TransportConfig> config = transport::TransportConfig::from_env();
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  config->enforce_priority = config->enforce_priority && enforce_priority;
  std::vector<std::future<Result<std::unique_ptr<Group>>>> futures;
  for (int r = 0; r < size; ++r) {
    futures.push_back(std::async(std::launch::async, [&store, r, size, config, key] {
      GroupOptions o;
      o.rank = r;
      o.size = size;
      o.timeout = 60s;
      o.listen_address = "tcp://127.0.0.1:0";
      o.key_prefix = key;
      o.config = *config;
      return Group::create(store, o);
    }));
  }
  std::vector<std::unique_ptr<Group>> groups;
  for (auto& f : futures) {
    auto g = f.get();
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    groups.push_back(g.ok() ? std::move(*g) : nullptr);
  }
  return groups;
}

void sum_i64(void* acc, const void* in, std::size_t n) {
  auto* a = static_cast<std::int64_t*>(acc);
  const auto* b = static_cast<const std::int64_t*>(in);
  for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
}

std::int64_t value(int rank, std::size_t i) {
  return static_cast<std::int64_t>((rank + 1) * 1000003) + static_cast<std::int64_t>(i % 9973);
}

struct Overtake {
  bool ok = true;           // every collective succeeded with the right sums
  bool small_first = true;  // on every rank the small one finished before the big one
  double big_share = 0;     // max over ranks: share of the big one's remaining
                            // reduce-scatter elements reduced while the small one ran
  std::string detail;
};

// Rank r posts a big all-reduce (priority 100) and, once the big one has reduced its first
// piece, a small one (priority 1), both through a scheduler of `concurrency` threads.
Overtake run_overtake(int n, int concurrency, bool enforce_priority, const std::string& key) {
  constexpr std::size_t kBig = std::size_t{16} << 20;  // int64s: 128 MiB
  constexpr std::size_t kSmall = 1 << 13;              // 64 KiB
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, n, enforce_priority, key);
  Overtake out;
  for (auto& g : groups) {
    if (!g) {
      out.ok = false;
      return out;
    }
  }
  struct RankState {
    std::vector<std::int64_t> big, small;
    std::atomic<std::uint64_t> big_reduced{0};
    std::atomic<bool> big_done{false};
    std::uint64_t at_post = 0, at_small_done = 0;
    bool big_done_at_small_done = false;
    std::promise<Status> big_status, small_status;
  };
  std::vector<std::unique_ptr<RankState>> st;
  for (int r = 0; r < n; ++r) {
    auto s = std::make_unique<RankState>();
    s->big.resize(kBig);
    s->small.resize(kSmall);
    for (std::size_t i = 0; i < kBig; ++i) s->big[i] = value(r, i);
    for (std::size_t i = 0; i < kSmall; ++i) s->small[i] = value(r, i + 7);
    st.push_back(std::move(s));
  }
  std::latch all_moving(n);
  std::vector<std::thread> posters;
  for (int r = 0; r < n; ++r) {
    posters.emplace_back([&, r] {
      RankState& s = *st[static_cast<std::size_t>(r)];
      Group& g = *groups[static_cast<std::size_t>(r)];
      CollectiveScheduler sched("test-coll", concurrency);
      ReduceFn counting = [&s](void* acc, const void* in, std::size_t c) {
        sum_i64(acc, in, c);
        s.big_reduced += c;
      };
      sched.post(true, [&](std::uint64_t ticket) {
        Group::SeqScope scope(g, ticket);
        Status status = g.allreduce(s.big.data(), kBig, 8, counting, 100);
        s.big_done = true;
        s.big_status.set_value(status);
      });
      // Post the small one once the big one is moving on this rank, at the same moment on
      // every rank (so the small ring does not wait for a late rank while the big one runs).
      eventually([&] { return s.big_reduced.load() > 0 || s.big_done.load(); });
      all_moving.arrive_and_wait();
      s.at_post = s.big_reduced.load();
      sched.post(true, [&](std::uint64_t ticket) {
        Group::SeqScope scope(g, ticket);
        Status status = g.allreduce(s.small.data(), kSmall, 8, sum_i64, 1);
        s.at_small_done = s.big_reduced.load();
        s.big_done_at_small_done = s.big_done.load();
        s.small_status.set_value(status);
      });
      sched.shutdown();
    });
  }
  for (auto& t : posters) t.join();
  const std::uint64_t rs_total =
      (kBig / static_cast<std::size_t>(n)) * static_cast<std::size_t>(n - 1);
  for (int r = 0; r < n; ++r) {
    RankState& s = *st[static_cast<std::size_t>(r)];
    const Status b = s.big_status.get_future().get();
    const Status m = s.small_status.get_future().get();
    if (!b.ok() || !m.ok()) {
      out.ok = false;
      out.detail += "rank " + std::to_string(r) + ": " + b.to_string() + " / " + m.to_string();
    }
    if (s.big_done_at_small_done) out.small_first = false;
    const double remaining = static_cast<double>(rs_total - std::min(rs_total, s.at_post));
    const double moved = static_cast<double>(s.at_small_done - s.at_post);
    out.big_share = std::max(out.big_share, remaining > 0 ? moved / remaining : 1.0);
    out.detail += " rank " + std::to_string(r) + ": big reduced " + std::to_string(s.at_post) +
                  " at post, " + std::to_string(s.at_small_done) +
                  " when the small one finished, of " + std::to_string(rs_total) +
                  (s.big_done_at_small_done ? " (big already done)" : "") + ";";
  }
  for (std::size_t i = 0; i < kBig && out.ok; i += 4099) {
    std::int64_t want = 0;
    for (int q = 0; q < n; ++q) want += value(q, i);
    for (int r = 0; r < n; ++r) {
      if (st[static_cast<std::size_t>(r)]->big[i] != want) {
        out.ok = false;
        out.detail += " big sum wrong at " + std::to_string(i);
      }
    }
  }
  for (std::size_t i = 0; i < kSmall && out.ok; ++i) {
    std::int64_t want = 0;
    for (int q = 0; q < n; ++q) want += value(q, i + 7);
    for (int r = 0; r < n; ++r) {
      if (st[static_cast<std::size_t>(r)]->small[i] != want) {
        out.ok = false;
        out.detail += " small sum wrong at " + std::to_string(i);
      }
    }
  }
  return out;
}

// The criterion: the small one overtakes (finishes first, the big one moved less than this
// share of what it had left meanwhile). Measured on the shared 2-core machine: 0.2-0.5 with
// priorities (chunks already in the window and socket, thread wake-ups under load), 1.0
// without (the small one's pieces queue behind every queued piece of the big one).
constexpr double kMaxBigShare = 0.8;
constexpr int kAttempts = 3;
bool overtook(const Overtake& o) { return o.small_first && o.big_share < kMaxBigShare; }

TEST(ConcurrentCollectives, HighPriorityAllreduceOvertakesABigOneAtDefaults) {
  Result<int> k = CollectiveScheduler::configured_concurrency();
  ASSERT_TRUE(k.ok()) << k.status().to_string();
  ASSERT_GE(*k, 2) << "TICTAC_COLL_CONCURRENCY=1 runs collectives one at a time; this test "
                      "proves the default (unset it)";
  // Up to kAttempts: a starved collective thread (a loaded machine) can only delay the small
  // one, never make it overtake, so one success proves the mechanism; the counter-checks below
  // run as many attempts and must fail every one.
  bool any = false;
  std::string seen;
  for (int attempt = 0; attempt < kAttempts && !any; ++attempt) {
    const Overtake on = run_overtake(2, *k, true, "ovt-on" + std::to_string(attempt) + "/");
    ASSERT_TRUE(on.ok) << on.detail;
    any = overtook(on);
    std::printf("[ overtake ] concurrency %d: big share while the small one ran %.3f (%s)\n", *k,
                on.big_share, on.detail.c_str());
    seen += " attempt " + std::to_string(attempt) + ": share " + std::to_string(on.big_share) +
            (on.small_first ? "" : " (small not first)") + ";";
  }
  EXPECT_TRUE(any) << seen;
}

TEST(ConcurrentCollectives, CounterCheckSerialDoesNotOvertake) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const Overtake serial = run_overtake(2, 1, true, "ovt-serial" + std::to_string(attempt) + "/");
    ASSERT_TRUE(serial.ok) << serial.detail;
    EXPECT_FALSE(overtook(serial)) << "one collective at a time, yet:" << serial.detail;
    EXPECT_FALSE(serial.small_first);
  }
}

TEST(ConcurrentCollectives, CounterCheckWithoutPrioritiesDoesNotOvertake) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    const Overtake fifo = run_overtake(2, CollectiveScheduler::kDefaultConcurrency, false,
                                       "ovt-fifo" + std::to_string(attempt) + "/");
    ASSERT_TRUE(fifo.ok) << fifo.detail;
    EXPECT_FALSE(overtook(fifo)) << "TICTAC_PRIORITY=0, yet share " << fifo.big_share << ":"
                                 << fifo.detail;
    std::printf("[ overtake ] without priorities: big share %.3f\n", fifo.big_share);
  }
}

// 3 ranks with different concurrency (1, 4, 2): 24 all-reduces of mixed sizes and priorities
// (start priorities too) with a fence (barrier) every 8; every one matches across ranks and
// sums right.
TEST(ConcurrentCollectives, ManyInFlightWithFencesAndUnequalConcurrency) {
  constexpr int n = 3;
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, n, true, "many/");
  for (auto& g : groups) ASSERT_TRUE(g);
  const std::size_t sizes[] = {1, 5000, 300000, 17, 2 << 20, 64, 100003, 9};
  constexpr int kOps = 24;
  std::vector<std::vector<std::vector<std::int64_t>>> data(n);
  std::vector<std::future<Status>> done;
  std::vector<std::thread> posters;
  std::mutex mu;
  std::vector<Status> failures;
  for (int r = 0; r < n; ++r) {
    data[r].resize(kOps);
    for (int i = 0; i < kOps; ++i) {
      data[r][i].resize(sizes[i % 8]);
      for (std::size_t j = 0; j < data[r][i].size(); ++j) data[r][i][j] = value(r, j + i);
    }
  }
  const int concurrency[n] = {1, 4, 2};
  for (int r = 0; r < n; ++r) {
    posters.emplace_back([&, r] {
      Group& g = *groups[r];
      CollectiveScheduler sched("test-coll", concurrency[r]);
      auto note = [&](const Status& s) {
        if (s.ok()) return;
        std::lock_guard l(mu);
        failures.push_back(s);
      };
      for (int i = 0; i < kOps; ++i) {
        if (i % 8 == 7) {
          sched.post(false, [&](std::uint64_t t) {
            Group::SeqScope scope(g, t);
            note(g.barrier());
          });
        }
        // Start priorities as ordered_ddp's buckets: later ones mostly first, so ranks with
        // different concurrency start different collectives (the spare slot keeps it live).
        sched.post(true, (i * 7) % 5 - i, [&, i](std::uint64_t t) {
          Group::SeqScope scope(g, t);
          note(g.allreduce(data[r][i].data(), data[r][i].size(), 8, sum_i64, (i * 7) % 5));
        });
      }
      sched.shutdown();
    });
  }
  for (auto& t : posters) t.join();
  for (const Status& s : failures) ADD_FAILURE() << s.to_string();
  for (int i = 0; i < kOps; ++i) {
    for (std::size_t j = 0; j < data[0][i].size(); ++j) {
      std::int64_t want = 0;
      for (int q = 0; q < n; ++q) want += value(q, j + i);
      for (int r = 0; r < n; ++r) ASSERT_EQ(data[r][i][j], want) << "op " << i << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace tictac::group
