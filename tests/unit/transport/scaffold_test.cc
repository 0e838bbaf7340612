// Unit tests of the backend scaffold (transport/scaffold/): LoopLifetime's guards and tokens,
// the connect policy (Backoff, ReportOnce, ConnectRetry) and ConnectorSet. No sockets: a
// ProgressEngine in manual mode runs the deferred tasks and timers, and fake connectors stand in
// for the tcp, ucx and verbs ones.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transport/progress_engine.h"
#include "transport/scaffold/connector_set.h"
#include "transport/scaffold/lifetime.h"
#include "transport/scaffold/retry.h"

namespace tictac::transport::scaffold {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

std::unique_ptr<ProgressEngine> manual_engine() {
  auto e = ProgressEngine::create(ProgressEngine::Mode::manual, std::chrono::microseconds(0));
  EXPECT_TRUE(e.ok());
  return std::move(e).value();
}

// Runs the engine until `done` or `limit` passes.
void drive(ProgressEngine& e, const std::function<bool()>& done, milliseconds limit = 2000ms) {
  const auto end = Clock::now() + limit;
  while (!done() && Clock::now() < end) e.progress(1ms);
}

// ---------------------------------------------------------------------------------------------
// LoopLifetime

struct Owner {
  LoopLifetime lifetime;
};

TEST(LoopLifetime, GuardRunsWhileTheOwnerLivesAndNotAfter) {
  auto e = manual_engine();
  int ran = 0;
  auto owner = std::make_unique<Owner>();
  e->defer(owner->lifetime.guard([&ran] { ++ran; }));
  e->progress();
  EXPECT_EQ(ran, 1);  // alive: runs

  e->defer(owner->lifetime.guard([&ran] { ++ran; }));
  e->add_timer(Clock::now(), owner->lifetime.guard([&ran] { ++ran; }));
  const Task copy = owner->lifetime.guard([&ran] { ++ran; });
  owner.reset();  // every outstanding guard (and copies of them) is now void
  e->progress();
  copy();
  EXPECT_EQ(ran, 1);  // a guard that ignored liveness would have counted 3 more
}

TEST(LoopLifetime, GuardForwardsArguments) {
  Owner owner;
  int got = 0;
  std::function<void(int, int)> fn = owner.lifetime.guard([&got](int a, int b) { got = a * b; });
  fn(6, 7);
  EXPECT_EQ(got, 42);
}

// A pump that runs callbacks one by one; a callback may destroy the pump's owner.
struct Pump {
  void run(std::vector<std::function<void()>>& callbacks) {
    const auto self = lifetime.token();
    for (auto& cb : callbacks) {
      cb();
      if (!self.alive()) return;  // `this` is gone: touch nothing
    }
  }
  LoopLifetime lifetime;
};

TEST(LoopLifetime, TokenSeesTheOwnerDestroyedByACallback) {
  auto pump = std::make_unique<Pump>();
  int ran = 0;
  std::vector<std::function<void()>> callbacks = {
      [&] { ++ran; },
      [&] {
        ++ran;
        pump.reset();
      },
      [&] { ++ran; },  // must not run: the pump's owner is gone
  };
  pump->run(callbacks);
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(pump, nullptr);
}

TEST(LoopLifetime, TokenIsAliveUntilDestructionAndADefaultTokenNever) {
  LoopLifetime::Token none;
  EXPECT_FALSE(none.alive());
  auto owner = std::make_unique<Owner>();
  const LoopLifetime::Token t = owner->lifetime.token();
  EXPECT_TRUE(t.alive());
  owner.reset();
  EXPECT_FALSE(t.alive());
}

// ---------------------------------------------------------------------------------------------
// Backoff

TEST(Backoff, DoublingGrowsToTheCapAndAdvancesOnlyWhenGranted) {
  Backoff b = Backoff::doubling(5ms, 200ms);  // tcp and ucx
  const auto now = Clock::now();
  const auto far = now + 1h;
  std::vector<milliseconds> delays;
  for (int i = 0; i < 8; ++i) {
    const auto at = b.next(now, far);
    ASSERT_TRUE(at.has_value());
    delays.push_back(std::chrono::duration_cast<milliseconds>(*at - now));
  }
  EXPECT_EQ(delays, (std::vector<milliseconds>{5ms, 10ms, 20ms, 40ms, 80ms, 160ms, 200ms, 200ms}));

  Backoff c = Backoff::doubling(5ms, 200ms);
  EXPECT_FALSE(c.next(now, now + 5ms).has_value());  // at the deadline: no retry
  EXPECT_EQ(c.delay(), 5ms);                         // and the schedule did not move
  EXPECT_TRUE(c.next(now, now + 6ms).has_value());
  EXPECT_EQ(c.delay(), 10ms);
}

TEST(Backoff, ConstantStaysPut) {
  Backoff b = Backoff::constant(20ms);  // verbs
  const auto now = Clock::now();
  for (int i = 0; i < 4; ++i) {
    const auto at = b.next(now, now + 1h);
    ASSERT_TRUE(at.has_value());
    EXPECT_EQ(*at - now, 20ms);
  }
  EXPECT_FALSE(b.next(now, now + 20ms).has_value());
}

// ---------------------------------------------------------------------------------------------
// ReportOnce

TEST(ReportOnce, DeliversExactlyOnceAndCountsTheRest) {
  auto e = manual_engine();
  std::vector<StatusCode> reports;
  int after = 0;
  ReportOnce r(
      *e, [&](ConnectResult res) { reports.push_back(res.status().code()); }, [&] { ++after; });
  EXPECT_TRUE(r.open());
  EXPECT_TRUE(r.report(Status(StatusCode::timeout, "first")));
  EXPECT_FALSE(r.report(Status(StatusCode::unavailable, "second")));
  EXPECT_FALSE(r.report_soon(Status(StatusCode::unavailable, "third")));
  e->progress();
  EXPECT_EQ(reports, std::vector<StatusCode>{StatusCode::timeout});
  EXPECT_EQ(after, 1);
  EXPECT_EQ(r.ignored(), 2u);
  EXPECT_TRUE(r.delivered());
}

TEST(ReportOnce, AReportInsideStartIsDeliveredFromALaterLoopEvent) {
  auto e = manual_engine();
  int reports = 0;
  int after = 0;
  ReportOnce r(
      *e,
      [&](ConnectResult) {
        EXPECT_EQ(after, 0);  // on_done first, then `after`
        ++reports;
      },
      [&] { ++after; });
  {
    auto starting = r.starting();
    EXPECT_TRUE(r.report(Status(StatusCode::invalid_argument, "bad address")));
    EXPECT_EQ(reports, 0);  // never synchronously inside start()
    EXPECT_FALSE(r.open());
    EXPECT_FALSE(r.report(Status(StatusCode::internal, "again")));  // pending counts as made
  }
  EXPECT_EQ(reports, 0);
  e->progress();
  EXPECT_EQ(reports, 1);
  EXPECT_EQ(after, 1);
}

TEST(ReportOnce, AbandonCancelsAPendingReportAndRefusesLaterOnes) {
  auto e = manual_engine();
  int reports = 0;
  ReportOnce r(*e, [&](ConnectResult) { ++reports; });
  EXPECT_TRUE(r.report_soon(Status(StatusCode::timeout, "soon")));
  r.abandon();
  EXPECT_FALSE(r.report(Status(StatusCode::timeout, "late")));
  e->progress();
  e->progress();
  EXPECT_EQ(reports, 0);
}

TEST(ReportOnce, NoAfterWhenTheConnectFnDestroyedTheReporter) {
  auto e = manual_engine();
  int after = 0;
  std::unique_ptr<ReportOnce> r;
  r = std::make_unique<ReportOnce>(
      *e, [&](ConnectResult) { r.reset(); }, [&] { ++after; });
  r->report(Status(StatusCode::timeout, "x"));
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(after, 0);
}

// ---------------------------------------------------------------------------------------------
// ConnectRetry, through a fake connector shaped like the tcp/ucx/verbs ones.

class FakeConnector {
 public:
  struct Script {
    // What each attempt does: refuse (retry), succeed, finish twice, or hang (no outcome).
    enum class Outcome { refuse, succeed, succeed_twice, hang } outcome = Outcome::refuse;
    bool fail_in_start = false;  // like a bad address
    bool watch_deadline = true;  // ucx, verbs (tcp arms it per attempt)
  };

  FakeConnector(ProgressEngine& e, Script script, Clock::time_point deadline, Backoff backoff,
                ConnectFn on_done, std::function<void()> finished)
      : script_(script),
        retry_(e, deadline, backoff, std::move(on_done), std::move(finished),
               [this] { ++released; }) {}
  ~FakeConnector() { retry_.abandon(); }

  void start() {
    auto starting = retry_.starting();
    if (script_.fail_in_start) {
      retry_.report(Status(StatusCode::invalid_argument, "bad address"));  // found inside start()
      return;
    }
    if (script_.watch_deadline) retry_.watch_deadline(Status(StatusCode::timeout, "watchdog"));
    retry_.schedule(Clock::now(), [this] { attempt(); });
  }
  void abandon() { retry_.abandon(); }

  std::vector<Clock::time_point> attempts;
  std::vector<milliseconds> delays;  // the back-off delay in force at each attempt
  int released = 0;
  const ConnectRetry& retry() const { return retry_; }

 private:
  void attempt() {
    attempts.push_back(Clock::now());
    delays.push_back(retry_.backoff().delay());
    switch (script_.outcome) {
      case Script::Outcome::refuse:
        retry_.retry([this] { attempt(); }, Status(StatusCode::timeout, "gave up"));
        break;
      case Script::Outcome::succeed:
        retry_.report(std::unique_ptr<Endpoint>());
        break;
      case Script::Outcome::succeed_twice:
        retry_.report(std::unique_ptr<Endpoint>());
        retry_.report(Status(StatusCode::connection_lost, "late failure of the same attempt"));
        break;
      case Script::Outcome::hang:
        break;
    }
  }

  Script script_;
  ConnectRetry retry_;
};

struct Recorded {
  std::vector<Status> reports;
  int finished = 0;
};

std::unique_ptr<FakeConnector> make_fake(ProgressEngine& e, Recorded& rec,
                                         FakeConnector::Script script, milliseconds deadline_in,
                                         Backoff backoff = Backoff::doubling(5ms, 200ms)) {
  return std::make_unique<FakeConnector>(
      e, script, Clock::now() + deadline_in, backoff,
      [&rec](ConnectResult r) { rec.reports.push_back(r.ok() ? Status::Ok() : r.status()); },
      [&rec] {
        EXPECT_EQ(rec.reports.size(), 1u);  // finished comes after the report
        ++rec.finished;
      });
}

TEST(ConnectRetry, ExactlyOneReportEvenWhenTheAttemptFinishesTwice) {
  auto e = manual_engine();
  Recorded rec;
  auto c = make_fake(*e, rec, {.outcome = FakeConnector::Script::Outcome::succeed_twice}, 5000ms);
  c->start();
  EXPECT_TRUE(rec.reports.empty());  // the first attempt runs from a timer, not inside start()
  drive(*e, [&] { return !rec.reports.empty(); });
  e->progress();
  ASSERT_EQ(rec.reports.size(), 1u);
  EXPECT_TRUE(rec.reports[0].ok());
  EXPECT_EQ(rec.finished, 1);
  EXPECT_EQ(c->retry().reporter().ignored(), 1u);
  EXPECT_EQ(c->released, 1);
  EXPECT_EQ(c->attempts.size(), 1u);
}

TEST(ConnectRetry, AFailureFoundInsideStartIsReportedFromTheLoop) {
  auto e = manual_engine();
  Recorded rec;
  auto c = make_fake(*e, rec, {.fail_in_start = true}, 5000ms);
  c->start();
  EXPECT_TRUE(rec.reports.empty());  // never synchronously inside start()
  EXPECT_TRUE(c->retry().done());
  e->progress();
  ASSERT_EQ(rec.reports.size(), 1u);
  EXPECT_EQ(rec.reports[0].code(), StatusCode::invalid_argument);
  EXPECT_EQ(rec.finished, 1);
}

TEST(ConnectRetry, BackoffGrowsBetweenRefusedAttemptsAndStopsAtTheDeadline) {
  auto e = manual_engine();
  Recorded rec;
  // Without the watchdog (as tcp between attempts): the schedule alone must stop at the deadline.
  auto c = make_fake(
      *e, rec, {.outcome = FakeConnector::Script::Outcome::refuse, .watch_deadline = false}, 120ms);
  const auto deadline = Clock::now() + 120ms;
  c->start();
  drive(*e, [&] { return !rec.reports.empty(); });
  ASSERT_EQ(rec.reports.size(), 1u);
  EXPECT_EQ(rec.reports[0].code(), StatusCode::timeout);
  EXPECT_EQ(rec.reports[0].message(), "gave up");
  // Nominal schedule 0, 5, 15, 35, 75 ms (the next, 155 ms, is past the deadline): at most 5
  // attempts, each gap at least the delay then in force, the delays doubling.
  ASSERT_GE(c->attempts.size(), 2u);
  EXPECT_LE(c->attempts.size(), 5u);
  for (std::size_t i = 1; i < c->attempts.size(); ++i) {
    EXPECT_GE(c->attempts[i] - c->attempts[i - 1], c->delays[i - 1]);
    EXPECT_EQ(c->delays[i], 2 * c->delays[i - 1]);
    EXPECT_LT(c->attempts[i], deadline);
  }
  // Nothing more after the report.
  const std::size_t n = c->attempts.size();
  for (int i = 0; i < 20; ++i) e->progress(5ms);
  EXPECT_EQ(c->attempts.size(), n);
  EXPECT_EQ(rec.reports.size(), 1u);
  EXPECT_EQ(rec.finished, 1);
}

TEST(ConnectRetry, ConstantBackoffKeepsItsDelay) {
  auto e = manual_engine();
  Recorded rec;
  auto c = make_fake(*e, rec, {.outcome = FakeConnector::Script::Outcome::refuse}, 100ms,
                     Backoff::constant(20ms));
  c->start();
  drive(*e, [&] { return !rec.reports.empty(); });
  ASSERT_EQ(rec.reports.size(), 1u);
  EXPECT_EQ(rec.reports[0].code(), StatusCode::timeout);
  ASSERT_GE(c->attempts.size(), 2u);
  EXPECT_LE(c->attempts.size(), 5u);  // 0, 20, 40, 60, 80 at most
  for (std::size_t i = 1; i < c->attempts.size(); ++i) {
    EXPECT_GE(c->attempts[i] - c->attempts[i - 1], 20ms);
    EXPECT_EQ(c->delays[i], 20ms);
  }
}

TEST(ConnectRetry, TheDeadlineWatchdogEndsAHungAttempt) {
  auto e = manual_engine();
  Recorded rec;
  auto c = make_fake(*e, rec, {.outcome = FakeConnector::Script::Outcome::hang}, 30ms);
  c->start();
  drive(*e, [&] { return !rec.reports.empty(); });
  ASSERT_EQ(rec.reports.size(), 1u);
  EXPECT_EQ(rec.reports[0].message(), "watchdog");
  EXPECT_EQ(c->attempts.size(), 1u);
  EXPECT_EQ(c->released, 1);
}

TEST(ConnectRetry, AbandonNeverReports) {
  auto e = manual_engine();
  Recorded rec;
  auto c = make_fake(*e, rec, {.outcome = FakeConnector::Script::Outcome::refuse}, 30ms);
  c->start();
  e->progress();  // the first attempt, then a retry is scheduled
  ASSERT_EQ(c->attempts.size(), 1u);
  c->abandon();
  c->abandon();  // idempotent
  EXPECT_EQ(c->released, 1);
  for (int i = 0; i < 10; ++i) e->progress(10ms);  // past the deadline
  EXPECT_TRUE(rec.reports.empty());
  EXPECT_EQ(rec.finished, 0);
  EXPECT_EQ(c->attempts.size(), 1u);
  c.reset();  // the destructor's abandon finds nothing left to release
  EXPECT_TRUE(rec.reports.empty());
}

TEST(ConnectRetry, AbandonInsideStartCancelsThePendingReport) {
  auto e = manual_engine();
  Recorded rec;
  auto c = make_fake(*e, rec, {.fail_in_start = true}, 30ms);
  c->start();
  c->abandon();
  e->progress();
  e->progress();
  EXPECT_TRUE(rec.reports.empty());
}

// ---------------------------------------------------------------------------------------------
// ConnectorSet

struct Counters {
  int started = 0;
  int abandoned = 0;
  int destroyed = 0;
};

class SetConnector {
 public:
  SetConnector(Counters& n, std::function<void()> finished)
      : n_(n), finished_(std::move(finished)) {}
  ~SetConnector() { ++n_.destroyed; }
  void start() { ++n_.started; }
  void abandon() { ++n_.abandoned; }
  void finish() { finished_(); }

 private:
  Counters& n_;
  std::function<void()> finished_;
};

class SetAcceptor {  // no abandon(): shutdown just drops it (the verbs acceptors)
 public:
  SetAcceptor(Counters& n, std::function<void()> finished)
      : n_(n), finished_(std::move(finished)) {}
  ~SetAcceptor() { ++n_.destroyed; }
  void start() { ++n_.started; }
  void finish() { finished_(); }

 private:
  Counters& n_;
  std::function<void()> finished_;
};

TEST(ConnectorSet, ErasesFinishedConnectorsLaterAndAbandonsTheRestOnShutdown) {
  auto e = manual_engine();
  Counters n;
  ConnectorSet<SetConnector> set;
  std::vector<SetConnector*> cs;
  for (int i = 0; i < 3; ++i) {
    cs.push_back(&set.start(*e, [&](std::function<void()> finished) {
      return std::make_unique<SetConnector>(n, std::move(finished));
    }));
  }
  EXPECT_EQ(n.started, 3);
  EXPECT_EQ(set.size(), 3u);

  cs[1]->finish();  // as from inside its report: not erased synchronously
  EXPECT_EQ(set.size(), 3u);
  EXPECT_EQ(n.destroyed, 0);
  e->progress();
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(n.destroyed, 1);

  set.shutdown();
  EXPECT_EQ(n.abandoned, 2);  // the two still there; the finished one was not abandoned
  EXPECT_EQ(n.destroyed, 3);
  EXPECT_TRUE(set.empty());
}

TEST(ConnectorSet, DropsConnectorsWithoutAbandonAndSurvivesLateErasures) {
  auto e = manual_engine();
  Counters n;
  auto set = std::make_unique<ConnectorSet<SetAcceptor>>();
  SetAcceptor& a = set->start(*e, [&](std::function<void()> finished) {
    return std::make_unique<SetAcceptor>(n, std::move(finished));
  });
  set->start(*e, [&](std::function<void()> finished) {
    return std::make_unique<SetAcceptor>(n, std::move(finished));
  });
  a.finish();   // an erase is queued ...
  set.reset();  // ... and the set (its backend) goes first
  EXPECT_EQ(n.destroyed, 2);
  e->progress();  // the queued erase does nothing
  EXPECT_EQ(n.destroyed, 2);
  EXPECT_EQ(n.abandoned, 0);
}

}  // namespace
}  // namespace tictac::transport::scaffold
