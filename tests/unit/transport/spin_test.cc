// Unit tests of the progress loop's spin-then-sleep: SpinPolicy's adaptive budget (pure logic),
// TICTAC_SPIN_US parsing, and the ProgressEngine's spin phase in manual mode (pollers, inbox,
// posts from the loop thread). No timing asserts: outcomes are counts and the spin statistics.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <future>
#include <string>
#include <thread>
#include <vector>

#include "transport/progress_engine.h"
#include "transport/spin_policy.h"

namespace tictac::transport {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(SpinPolicy, MissesHalveTheBudgetUntilOffAndAHitRestoresIt) {
  SpinPolicy p(microseconds(64));
  EXPECT_EQ(p.budget(), microseconds(64));
  p.spun(false);
  EXPECT_EQ(p.budget(), microseconds(32));
  p.spun(false);
  EXPECT_EQ(p.budget(), microseconds(16));
  p.spun(true);
  EXPECT_EQ(p.budget(), microseconds(64));
  for (int i = 0; i <= SpinPolicy::kLevels; ++i) p.spun(false);
  EXPECT_EQ(p.budget(), nanoseconds(0));  // off after kLevels + 1 misses in a row
  p.spun(false);
  EXPECT_EQ(p.budget(), nanoseconds(0));  // stays off
}

TEST(SpinPolicy, QuickWakeUpsBringSpinningBackGradually) {
  SpinPolicy p(microseconds(64));
  for (int i = 0; i <= SpinPolicy::kLevels; ++i) p.spun(false);
  ASSERT_EQ(p.budget(), nanoseconds(0));
  p.slept(microseconds(500), true);  // work came later than a full spin: no change
  EXPECT_EQ(p.budget(), nanoseconds(0));
  p.slept(microseconds(10), false);  // a timeout, not work: no change
  EXPECT_EQ(p.budget(), nanoseconds(0));
  p.slept(microseconds(10), true);  // a full spin would have caught it
  EXPECT_EQ(p.budget(), microseconds(1));
  p.slept(microseconds(10), true);
  EXPECT_EQ(p.budget(), microseconds(2));
  // Work after more than the maximum but within kActiveGapFactor maxima: a ping-pong whose peer
  // sleeps too (its wake-up is in the gap). Counts as traffic; beyond that it does not.
  p.slept(microseconds(64 * SpinPolicy::kActiveGapFactor - 1), true);
  EXPECT_EQ(p.budget(), microseconds(4));
  p.slept(microseconds(64 * SpinPolicy::kActiveGapFactor + 1), true);
  EXPECT_EQ(p.budget(), microseconds(4));
  p.spun(true);
  EXPECT_EQ(p.budget(), microseconds(64));
  p.slept(microseconds(1), true);  // already at the maximum
  EXPECT_EQ(p.budget(), microseconds(64));
}

TEST(SpinPolicy, ZeroMaximumNeverSpins) {
  SpinPolicy p(microseconds(0));
  EXPECT_EQ(p.budget(), nanoseconds(0));
  p.spun(true);
  p.slept(microseconds(0), true);
  EXPECT_EQ(p.budget(), nanoseconds(0));
}

TEST(SpinFromText, AutoDependsOnCoresNumbersAreMicroseconds) {
  EXPECT_EQ(*spin_from_text("auto", 2), microseconds(0));
  EXPECT_EQ(*spin_from_text("", kAutoSpinMinCores - 1), microseconds(0));
  EXPECT_EQ(*spin_from_text("auto", kAutoSpinMinCores), microseconds(kAutoSpinUs));
  EXPECT_EQ(*spin_from_text("0", 64), microseconds(0));
  EXPECT_EQ(*spin_from_text("25", 2), microseconds(25));
  for (const char* bad : {"-1", "fast", "2000000", "10us"}) {
    Result<microseconds> r = spin_from_text(bad, 8);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
    EXPECT_NE(r.status().message().find("TICTAC_SPIN_US"), std::string::npos)
        << r.status().message();
  }
}

std::unique_ptr<ProgressEngine> manual_engine(microseconds spin) {
  auto e = ProgressEngine::create(ProgressEngine::Mode::manual, spin);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(e).value();
}

TEST(ProgressEngineSpin, PollerThatFindsWorkEndsTheSpinAndItsDeferredWorkRuns) {
  auto e = manual_engine(std::chrono::seconds(100));  // longer than the test may take: a hit
  int calls = 0;
  bool ran = false;
  e->add_poller([&] {
    if (++calls < 3) return false;
    e->defer([&] { ran = true; });
    return true;
  });
  EXPECT_GT(e->progress(std::chrono::seconds(100)), 0u);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE(ran);
  EXPECT_EQ(e->spin_stats().hits, 1u);
  EXPECT_EQ(e->spin_stats().sleeps, 0u);
}

TEST(ProgressEngineSpin, AMissSleepsAndShrinksTheBudget) {
  auto e = manual_engine(microseconds(200));
  int calls = 0;
  const auto id = e->add_poller([&] {
    ++calls;
    return false;
  });
  EXPECT_EQ(e->progress(milliseconds(1)), 0u);
  EXPECT_GT(calls, 0);
  EXPECT_EQ(e->spin_stats().misses, 1u);
  EXPECT_EQ(e->spin_stats().sleeps, 1u);
  e->remove_poller(id);
  const int before = calls;
  for (int i = 0; i < 10; ++i) e->progress(milliseconds(1));
  EXPECT_EQ(calls, before);  // removed
  // After kLevels + 1 misses in a row the loop sleeps without spinning.
  const auto misses = e->spin_stats().misses;
  EXPECT_EQ(misses, static_cast<std::uint64_t>(SpinPolicy::kLevels) + 1);
}

TEST(ProgressEngineSpin, ZeroSpinNeverCallsPollers) {
  auto e = manual_engine(microseconds(0));
  int calls = 0;
  e->add_poller([&] { return ++calls > 0; });
  e->progress(milliseconds(1));
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(e->spin_stats().hits + e->spin_stats().misses, 0u);
  EXPECT_EQ(e->spin_stats().sleeps, 1u);
}

TEST(ProgressEngineSpin, ASpinningLoopSeesAPostFromAnotherThread) {
  auto e = manual_engine(std::chrono::seconds(100));
  bool ran = false;
  bool posted = false;
  e->add_poller([&] {
    if (!posted) {  // post from another thread while the loop spins, then let it look
      std::thread([&] { e->post([&] { ran = true; }); }).join();
      posted = true;
    }
    return false;
  });
  EXPECT_GT(e->progress(std::chrono::seconds(100)), 0u);
  EXPECT_TRUE(ran);
  EXPECT_EQ(e->spin_stats().hits, 1u);
  EXPECT_EQ(e->spin_stats().sleeps, 0u);
}

TEST(ProgressEngineSpin, PostFromTheLoopThreadIsRunWithoutSleeping) {
  auto e = manual_engine(microseconds(0));
  int ran = 0;
  e->post([&] {
    ++ran;
    e->post([&] { ++ran; });  // on the loop thread: no eventfd write, the inbox flag suffices
  });
  EXPECT_EQ(e->progress(milliseconds(0)), 1u);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(e->progress(std::chrono::seconds(100)), 1u);  // would sleep 100 s if it missed the task
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(e->spin_stats().sleeps, 0u);
}

TEST(ProgressEngineSpin, PostFromAnotherThreadWakesASleepingLoop) {
  auto e = manual_engine(microseconds(0));
  e->progress(milliseconds(0));  // this thread drives the loop
  bool ran = false;
  // Most likely posted while the loop sleeps in epoll_wait: only the eventfd can wake it (a lost
  // wake-up would block for the whole 100 s, past the test's timeout).
  std::thread poster([&] {
    std::this_thread::sleep_for(milliseconds(20));
    e->post([&] { ran = true; });
  });
  EXPECT_EQ(e->progress(std::chrono::seconds(100)), 1u);
  poster.join();
  EXPECT_TRUE(ran);
}

// A pipe whose read end is readable (one byte written); closed at the end of the test.
struct ReadablePipe {
  ReadablePipe() {
    EXPECT_EQ(::pipe(fds), 0);
    EXPECT_EQ(::write(fds[1], "x", 1), 1);
  }
  ~ReadablePipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  int fds[2] = {-1, -1};
};

TEST(ProgressEngineSpin, ASpinMakesNoEpollCallWhilePollersCoverEveryWatchedFd) {
  auto e = manual_engine(std::chrono::seconds(100));
  ReadablePipe covered;
  int handled = 0;
  ASSERT_TRUE(e->watch_polled(covered.fds[0], EPOLLIN, [&](std::uint32_t) { ++handled; }).ok());
  int calls = 0;
  e->add_poller([&] { return ++calls % 50 == 0; });
  e->progress(std::chrono::seconds(100));
  EXPECT_EQ(calls, 50);
  EXPECT_EQ(e->spin_stats().spin_epolls, 0u);  // 50 rounds, no syscall: the poller covers the fd
  EXPECT_EQ(handled, 0);
  // Counter-check: an fd no poller covers makes every round look at epoll too (and its own
  // readiness ends the spin, so that fd is drained here first).
  ReadablePipe uncovered;
  ASSERT_TRUE(e->watch(uncovered.fds[0], EPOLLIN, [&](std::uint32_t) {
                 char c;
                 EXPECT_EQ(::read(uncovered.fds[0], &c, 1), 1);
               }).ok());
  e->progress(std::chrono::seconds(100));
  EXPECT_GT(e->spin_stats().spin_epolls, 0u);
  e->unwatch(uncovered.fds[0]);
  const auto epolls = e->spin_stats().spin_epolls;
  e->progress(std::chrono::seconds(100));
  EXPECT_EQ(e->spin_stats().spin_epolls, epolls);  // unwatched: back to pollers only
}

TEST(ProgressEngineSpin, APolledFdStillWakesASleepingLoop) {
  auto e = manual_engine(microseconds(0));  // no spin: the loop sleeps in epoll_wait at once
  ReadablePipe covered;
  int handled = 0;
  ASSERT_TRUE(e->watch_polled(covered.fds[0], EPOLLIN, [&](std::uint32_t) {
                 char c;
                 EXPECT_EQ(::read(covered.fds[0], &c, 1), 1);
                 ++handled;
               }).ok());
  EXPECT_EQ(e->progress(std::chrono::seconds(100)), 1u);  // would block 100 s if it were ignored
  EXPECT_EQ(handled, 1);
}

TEST(ProgressEngineSpin, BeforeSleepRunsOnlyWhenTheLoopWouldBlockAndCanKeepItAwake) {
  auto e = manual_engine(microseconds(0));
  int hooks = 0;
  bool pending = true;
  e->add_poller([] { return false; },
                [&] {
                  ++hooks;
                  return pending;
                });
  e->progress(milliseconds(0));  // a zero timeout never blocks: no hook
  EXPECT_EQ(hooks, 0);
  e->progress(std::chrono::seconds(100));  // pending work: returns at once instead of 100 s
  EXPECT_EQ(hooks, 1);
  EXPECT_EQ(e->spin_stats().sleeps, 0u);
  pending = false;  // counter-check: nothing pending, so the loop blocks (for 1 ms)
  e->progress(milliseconds(1));
  EXPECT_EQ(hooks, 2);
  EXPECT_EQ(e->spin_stats().sleeps, 1u);
}

TEST(ProgressEngineSpin, PostsFromTheLoopThreadKeepTheirOrderAndSkipTheInbox) {
  auto e = manual_engine(microseconds(0));
  std::vector<int> order;
  e->post([&] {
    for (int i = 0; i < 5; ++i) e->post([&order, i] { order.push_back(i); });
    std::thread([&] { e->post([&order] { order.push_back(100); }); }).join();
  });
  e->progress(milliseconds(0));
  EXPECT_TRUE(order.empty());              // posted during this iteration: they run in the next one
  e->progress(std::chrono::seconds(100));  // would sleep 100 s if it missed them
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 100}));
  EXPECT_EQ(e->spin_stats().sleeps, 0u);
}

TEST(ProgressEngineThread, TheLoopThreadIsNamedTictacLoop) {
  auto e = ProgressEngine::create(ProgressEngine::Mode::thread, microseconds(0));
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  std::promise<std::string> name;
  (*e)->post([&] {
    char buf[16] = {};
    ::pthread_getname_np(::pthread_self(), buf, sizeof buf);
    name.set_value(buf);
  });
  std::future<std::string> got = name.get_future();
  ASSERT_EQ(got.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(got.get(), "tictac-loop");
}

// Deferred calls (add_deferred_call / defer_call / remove_deferred_call): queued by id like
// defer(), once per defer_call, and a removed call's queued runs are skipped, also when the call
// removes itself while it runs (an endpoint destroyed inside its own flush).
TEST(ProgressEngineDeferredCall, RunsOncePerDeferAndNotAfterItIsRemoved) {
  auto e = manual_engine(microseconds(0));
  int runs = 0;
  ProgressEngine::DeferredCallId id = 0;
  e->post([&] {
    id = e->add_deferred_call([&] { ++runs; });
    e->defer_call(id);
    e->defer_call(id);
  });
  e->progress(milliseconds(10));
  EXPECT_EQ(runs, 2);
  e->post([&] {
    e->defer_call(id);
    e->remove_deferred_call(id);  // queued, then removed: skipped
  });
  e->progress(milliseconds(10));
  EXPECT_EQ(runs, 2);
}

TEST(ProgressEngineDeferredCall, ACallMayRemoveItselfWhileItRuns) {
  auto e = manual_engine(microseconds(0));
  int runs = 0;
  int after = 0;
  ProgressEngine::DeferredCallId id = 0;
  e->post([&] {
    id = e->add_deferred_call([&] {
      ++runs;
      e->remove_deferred_call(id);
      ++after;  // still running on its own copy
    });
    e->defer_call(id);
    e->defer_call(id);  // the second run finds the call removed
  });
  e->progress(milliseconds(10));
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(after, 1);
}

// Posted items (ProgressEngine::post(PostedWork*)): run in posting order with the posted tasks,
// from other threads and from the loop thread; an item that never runs is dropped, not leaked.
struct Item final : PostedWork {
  Item(std::vector<std::string>* log, std::string name) : log(log), name(std::move(name)) {}
  void run_posted() override {
    log->push_back("ran " + name);
    delete this;
  }
  void drop_posted() override {
    log->push_back("dropped " + name);
    delete this;
  }
  std::vector<std::string>* log;
  std::string name;
};

TEST(ProgressEnginePostedWork, RunsInPostingOrderWithTasks) {
  auto e = manual_engine(microseconds(0));
  std::vector<std::string> log;
  std::thread other([&] {
    e->post(new Item(&log, "a"));
    e->post([&] {
      log.push_back("task b");
      e->post(new Item(&log, "c"));  // from the loop thread: after b, before d
      e->post([&] { log.push_back("task d"); });
    });
    e->post(new Item(&log, "e"));
  });
  other.join();
  for (int i = 0; i < 5 && log.size() < 5; ++i) e->progress(milliseconds(10));
  EXPECT_EQ(log, (std::vector<std::string>{"ran a", "task b", "ran e", "ran c", "task d"}));
}

TEST(ProgressEnginePostedWork, ItemsThatNeverRunAreDropped) {
  std::vector<std::string> log;
  {
    auto e = manual_engine(microseconds(0));
    e->post(new Item(&log, "queued"));  // still queued when the engine goes
    e->stop();
    e->post(new Item(&log, "late"));  // after stop(): dropped at once
    EXPECT_EQ(log, (std::vector<std::string>{"dropped late"}));
  }
  EXPECT_EQ(log, (std::vector<std::string>{"dropped late", "dropped queued"}));
}

}  // namespace
}  // namespace tictac::transport
