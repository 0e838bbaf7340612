// SpinPolicy: how long the progress loop polls (backends' pollers, the inbox, epoll with a zero
// timeout) before it blocks in epoll_wait: adaptive spin-then-sleep (TICTAC_SPIN_US).
//
// Contract: budget() is the next spin's length, between 0 and the maximum. A spin that found work
// restores the full budget; a spin that found nothing halves it, and after kLevels misses in a
// row the loop stops spinning (an idle loop costs ~2x the maximum once, then nothing). A sleep
// that was ended by work within kActiveGapFactor x the maximum means traffic is flowing, so it
// doubles the budget again (from "off" back to max / 2^kLevels). Not just within the maximum: in
// a ping-pong whose two loops both sleep, each gap is the peer's wake-up plus its work (~55 us on
// an idle 2-vCPU VM against ~10 us when both spin), longer than a 50 us budget, so that rule
// left both sides asleep for good once a hiccup had switched them off (tcp 8 B latency 54 us
// instead of 11 us over 20000 exchanges). Pure logic: no clock, no threads; the engine measures
// and reports. Not thread-safe (the loop thread owns it).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace tictac::transport {

class SpinPolicy {
 public:
  static constexpr int kLevels = 6;  // budgets max, max/2, ... max/64, then off
  static constexpr int kActiveGapFactor = 4;  // a sleep this many maxima long still counts as traffic

  explicit SpinPolicy(std::chrono::microseconds max) : max_(max) {}

  std::chrono::microseconds max() const { return max_; }
  std::chrono::nanoseconds budget() const;
  // A spin of budget() ended: `found_work` = something arrived before the budget ran out.
  void spun(bool found_work);
  // The loop blocked (after a spin or none) and woke after `slept`; `work` = an event or a task
  // woke it (not a timeout).
  void slept(std::chrono::nanoseconds slept, bool work);

 private:
  std::chrono::microseconds max_;
  int level_ = 0;  // budget = max_ >> level_; kLevels + 1 = off
};

// TICTAC_SPIN_US: unset (or "auto") = the automatic default for a machine with `cores` CPUs
// (kAutoSpinUs with at least kAutoSpinMinCores cores, else 0: spinning on a small, shared machine
// steals the CPU the peer needs); a number = that many microseconds (0 = never spin, the loop
// sleeps in epoll_wait at once). invalid_argument names the variable for anything else.
inline constexpr std::int64_t kAutoSpinUs = 50;
inline constexpr unsigned kAutoSpinMinCores = 4;
inline constexpr std::int64_t kMaxSpinUs = 1'000'000;
Result<std::chrono::microseconds> spin_from_text(std::string_view text, unsigned cores);
// spin_from_text() of the environment's TICTAC_SPIN_US and std::thread::hardware_concurrency().
Result<std::chrono::microseconds> spin_from_env();

}  // namespace tictac::transport
