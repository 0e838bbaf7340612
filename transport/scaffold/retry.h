// The connect policy shared by the tcp, ucx and verbs connectors (backend scaffold,
// docs/transport.md): the back-off schedule between attempts, the deadline, the one report
// through the ConnectFn, and abandon().
//
// - Backoff: the delays between attempts (tcp, ucx: 5 ms doubling up to 200 ms; verbs: 20 ms).
//   A retry is granted only when it would start before the deadline.
// - ReportOnce: delivers one connect result, never inside the connector's start() (a report
//   made there is delivered from a timer due now), and ignores every later report (counted).
// - ConnectRetry: what a connector embeds: attempts run from timers, retry() after a failed
//   attempt (or the give-up report at the deadline), an optional deadline watchdog, report()
//   (once: timers cancelled, the attempt's resources released, then the ConnectFn, then the
//   owner's `finished`) and abandon() (no report ever).
// What each connector keeps to itself: how an attempt is made, which failures are retried
// (tcp, ucx: all; verbs: refused connects only) and the messages.
// Threading: loop thread of the engine only.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>

#include "transport/backend.h"
#include "transport/scaffold/lifetime.h"

namespace tictac::transport::scaffold {

using ConnectResult = Result<std::unique_ptr<Endpoint>>;

class Backoff {
 public:
  // first, 2*first, 4*first ... never above cap.
  static Backoff doubling(std::chrono::milliseconds first, std::chrono::milliseconds cap) {
    return Backoff(first, 2, cap);
  }
  static Backoff constant(std::chrono::milliseconds every) { return Backoff(every, 1, every); }
  // The socket connectors' schedule (tcp, ucx): 5 ms, doubling up to 200 ms.
  static Backoff for_sockets() {
    return doubling(std::chrono::milliseconds(5), std::chrono::milliseconds(200));
  }

  // The delay before the next retry.
  std::chrono::milliseconds delay() const { return delay_; }
  // After a failed attempt at `now`: when the next attempt starts (the schedule then advances),
  // or nullopt when that would not be before `deadline` (the schedule stays).
  std::optional<Clock::time_point> next(Clock::time_point now, Clock::time_point deadline);

 private:
  Backoff(std::chrono::milliseconds first, int factor, std::chrono::milliseconds cap)
      : delay_(first), factor_(factor), cap_(cap) {}
  std::chrono::milliseconds delay_;
  int factor_;
  std::chrono::milliseconds cap_;
};

class ReportOnce {
 public:
  // `after` (may be empty) runs after on_done, unless on_done destroyed this object.
  ReportOnce(ProgressEngine& engine, ConnectFn on_done, std::function<void()> after = nullptr);
  ~ReportOnce();  // a report still pending is dropped
  ReportOnce(const ReportOnce&) = delete;
  ReportOnce& operator=(const ReportOnce&) = delete;

  // Delivers `result` now: the caller is a loop event (a timer, an fd handler, a deferred task).
  // Inside a Starting scope it is report_soon() instead. False (and counted) when a report was
  // made already or the connect was abandoned.
  bool report(ConnectResult result);
  // Delivers `result` from a timer due now (abandon() before it fires cancels it).
  bool report_soon(ConnectResult result);
  // No report any more (a pending one is cancelled). Idempotent.
  void abandon();
  // Neither reported (delivered or pending) nor abandoned.
  bool open() const { return state_ == State::open; }
  bool delivered() const { return state_ == State::delivered; }
  // Reports refused because one was made before (or after abandon()).
  std::size_t ignored() const { return ignored_; }

  // While one lives, report() defers: the connector opens one for its start().
  class [[nodiscard]] Starting {
   public:
    explicit Starting(ReportOnce& r) : r_(&r) { ++r_->starting_; }
    ~Starting() { --r_->starting_; }
    Starting(const Starting&) = delete;
    Starting& operator=(const Starting&) = delete;

   private:
    ReportOnce* r_;
  };
  Starting starting() { return Starting(*this); }

 private:
  enum class State { open, pending, delivered, abandoned };
  void deliver(ConnectResult result);

  ProgressEngine& engine_;
  ConnectFn on_done_;
  std::function<void()> after_;
  State state_ = State::open;
  int starting_ = 0;
  ProgressEngine::TimerId timer_ = 0;
  std::optional<ConnectResult> pending_;
  std::size_t ignored_ = 0;
  LoopLifetime lifetime_;
};

class ConnectRetry {
 public:
  // `release` drops what the current attempt holds (socket, half-built endpoint); it runs when
  // the connect reports or is abandoned, before the ConnectFn. `finished` runs after the
  // ConnectFn (never after abandon()) so the owner can drop the connector later.
  ConnectRetry(ProgressEngine& engine, Clock::time_point deadline, Backoff backoff,
               ConnectFn on_done, std::function<void()> finished, std::function<void()> release);
  ~ConnectRetry();  // cancels the timers; reports nothing and does not call release
  ConnectRetry(const ConnectRetry&) = delete;
  ConnectRetry& operator=(const ConnectRetry&) = delete;

  ProgressEngine& engine() const { return engine_; }
  Clock::time_point deadline() const { return deadline_; }
  const Backoff& backoff() const { return backoff_; }
  // Reported (or a report is pending) or abandoned: the connector does nothing more.
  bool done() const { return !report_.open(); }

  // Runs `attempt` from a timer at `when`, replacing an attempt scheduled before.
  void schedule(Clock::time_point when, Task attempt);
  // After a failed attempt: cancels a scheduled attempt, then schedules `attempt` after the next
  // back-off delay (true), or, when that would not start before the deadline, reports `gave_up`
  // (false). Nothing when done().
  bool retry(Task attempt, Status gave_up);
  // Reports `why` at the deadline unless a report came first (replaces an earlier watchdog).
  void watch_deadline(Status why);
  void cancel_deadline();

  // The one report: timers cancelled, release, the ConnectFn, finished. Ignored when done().
  void report(ConnectResult result);
  // The same from a timer due now (for failures found inside start()).
  void report_soon(ConnectResult result);
  // No report ever: timers cancelled, release. Idempotent.
  void abandon();

  // The connector's start() holds one: a report made inside is delivered from a loop event.
  ReportOnce::Starting starting() { return report_.starting(); }
  const ReportOnce& reporter() const { return report_; }

 private:
  void stop();  // cancels the timers, releases

  ProgressEngine& engine_;
  const Clock::time_point deadline_;
  Backoff backoff_;
  std::function<void()> release_;
  ProgressEngine::TimerId attempt_timer_ = 0;
  ProgressEngine::TimerId deadline_timer_ = 0;
  ReportOnce report_;
};

}  // namespace tictac::transport::scaffold
