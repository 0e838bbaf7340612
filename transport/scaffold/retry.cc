#include "transport/scaffold/retry.h"

#include <algorithm>

namespace tictac::transport::scaffold {

// ---------------------------------------------------------------------------------------------
// Backoff

std::optional<Clock::time_point> Backoff::next(Clock::time_point now, Clock::time_point deadline) {
  const Clock::time_point at = now + delay_;
  if (at >= deadline) return std::nullopt;
  delay_ = std::min(delay_ * factor_, cap_);
  return at;
}

// ---------------------------------------------------------------------------------------------
// ReportOnce

ReportOnce::ReportOnce(ProgressEngine& engine, ConnectFn on_done, std::function<void()> after)
    : engine_(engine), on_done_(std::move(on_done)), after_(std::move(after)) {}

ReportOnce::~ReportOnce() { engine_.cancel_timer(timer_); }

bool ReportOnce::report(ConnectResult result) {
  if (state_ != State::open) {
    ++ignored_;
    return false;
  }
  if (starting_ > 0) return report_soon(std::move(result));
  deliver(std::move(result));
  return true;
}

bool ReportOnce::report_soon(ConnectResult result) {
  if (state_ != State::open) {
    ++ignored_;
    return false;
  }
  state_ = State::pending;
  pending_.emplace(std::move(result));
  timer_ = engine_.add_timer(Clock::now(), [this] {
    timer_ = 0;
    ConnectResult r = std::move(*pending_);
    pending_.reset();
    deliver(std::move(r));
  });
  return true;
}

void ReportOnce::abandon() {
  if (state_ == State::delivered || state_ == State::abandoned) return;
  state_ = State::abandoned;
  engine_.cancel_timer(timer_);
  timer_ = 0;
  pending_.reset();
}

void ReportOnce::deliver(ConnectResult result) {
  state_ = State::delivered;
  ConnectFn fn = std::move(on_done_);
  std::function<void()> after = std::move(after_);
  const auto self = lifetime_.token();
  fn(std::move(result));
  // The ConnectFn may have dropped the connector (and this object) already: nothing to tell.
  if (self.alive() && after) after();
}

// ---------------------------------------------------------------------------------------------
// ConnectRetry

ConnectRetry::ConnectRetry(ProgressEngine& engine, Clock::time_point deadline, Backoff backoff,
                           ConnectFn on_done, std::function<void()> finished,
                           std::function<void()> release)
    : engine_(engine),
      deadline_(deadline),
      backoff_(backoff),
      release_(std::move(release)),
      report_(engine, std::move(on_done), std::move(finished)) {}

ConnectRetry::~ConnectRetry() {
  engine_.cancel_timer(attempt_timer_);
  engine_.cancel_timer(deadline_timer_);
}

void ConnectRetry::schedule(Clock::time_point when, Task attempt) {
  engine_.cancel_timer(attempt_timer_);
  attempt_timer_ = engine_.add_timer(when, [this, attempt = std::move(attempt)] {
    attempt_timer_ = 0;
    attempt();
  });
}

bool ConnectRetry::retry(Task attempt, Status gave_up) {
  if (done()) return false;
  engine_.cancel_timer(attempt_timer_);
  attempt_timer_ = 0;
  const std::optional<Clock::time_point> at = backoff_.next(Clock::now(), deadline_);
  if (!at) {
    report(std::move(gave_up));
    return false;
  }
  schedule(*at, std::move(attempt));
  return true;
}

void ConnectRetry::watch_deadline(Status why) {
  engine_.cancel_timer(deadline_timer_);
  deadline_timer_ = engine_.add_timer(deadline_, [this, why = std::move(why)] {
    deadline_timer_ = 0;
    report(why);
  });
}

void ConnectRetry::cancel_deadline() {
  engine_.cancel_timer(deadline_timer_);
  deadline_timer_ = 0;
}

void ConnectRetry::stop() {
  cancel_deadline();
  engine_.cancel_timer(attempt_timer_);
  attempt_timer_ = 0;
  if (release_) release_();
}

void ConnectRetry::report(ConnectResult result) {
  if (!done()) stop();  // once done, ReportOnce ignores (and counts) the report
  report_.report(std::move(result));
}

void ConnectRetry::report_soon(ConnectResult result) {
  if (!done()) stop();  // once done, ReportOnce ignores (and counts) the report
  report_.report_soon(std::move(result));
}

void ConnectRetry::abandon() {
  const bool open = report_.open();  // else release ran already (or a report was delivered)
  report_.abandon();                 // cancels a pending report
  engine_.cancel_timer(attempt_timer_);
  engine_.cancel_timer(deadline_timer_);
  attempt_timer_ = deadline_timer_ = 0;
  if (open && release_) release_();
}

}  // namespace tictac::transport::scaffold
