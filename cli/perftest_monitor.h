// Monitor: how a perftest session's main thread waits for transport callbacks without ever
// hanging. Callbacks (on the Context's loop thread) change session state inside update(), or
// record a failure with fail(); the main thread blocks in wait() until its condition holds, a
// failure was recorded (the first one wins and is returned), or nothing at all happened for the
// idle limit (checked once per idle limit, so a stall is reported after one to two limits; a
// timeout Status that says what was awaited and how to raise the limit). One waiter at a time.
//
// Thread safety: all methods may be called from any thread. update()'s function runs under the
// monitor's mutex, and so does wait()'s condition: state they share needs no other lock. Neither
// may call back into the Monitor. Never call a blocking Context helper while holding the lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>

#include "common/status.h"

namespace tictac::cli::perftest {

class Monitor {
 public:
  explicit Monitor(std::chrono::milliseconds idle_limit) : idle_limit_(idle_limit) {}

  // Wakes the waiter only when its condition now holds: the loop thread does not pay a futex
  // wake-up (and the waiter a context switch) per callback. The waiter still sees the update
  // count when its idle check runs.
  template <typename F>
  void update(F&& change) {
    std::lock_guard<std::mutex> lock(mu_);
    change();
    ++events_;
    if (waiting_for_ != nullptr && (*waiting_for_)()) cv_.notify_all();
  }
  void fail(const Status& status);
  // ok once done() holds; else the first recorded failure, or timeout after idle_limit without
  // any update() or fail().
  Status wait(const std::function<bool()>& done, std::string_view what);
  // The first recorded failure (ok if none).
  Status failure();

 private:
  const std::chrono::milliseconds idle_limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t events_ = 0;
  const std::function<bool()>* waiting_for_ = nullptr;  // wait()'s condition while it waits
  Status failure_;
};

}  // namespace tictac::cli::perftest
