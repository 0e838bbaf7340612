#include "cli/perftest_monitor.h"

#include <string>

namespace tictac::cli::perftest {

void Monitor::fail(const Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok() && !status.ok()) failure_ = status;
  ++events_;
  cv_.notify_all();
}

Status Monitor::failure() {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

Status Monitor::wait(const std::function<bool()>& done, std::string_view what) {
  std::unique_lock<std::mutex> lock(mu_);
  std::uint64_t seen = events_;
  waiting_for_ = &done;
  struct Clear {
    const std::function<bool()>*& p;
    ~Clear() { p = nullptr; }
  } clear{waiting_for_};
  for (;;) {
    if (!failure_.ok()) return failure_;
    if (done()) return Status::Ok();
    // Woken by fail() or by an update() after which done() holds; otherwise after idle_limit_,
    // which is a timeout only if no update() happened in that time.
    cv_.wait_for(lock, idle_limit_, [&] { return !failure_.ok() || done(); });
    if (!failure_.ok() || done()) continue;
    if (events_ == seen) {
      return Status(StatusCode::timeout, "no progress for " + std::to_string(idle_limit_.count()) +
                                             " ms while waiting for " + std::string(what) +
                                             " (is the peer alive? raise --timeout or TICTAC_TIMEOUT)");
    }
    seen = events_;
  }
}

}  // namespace tictac::cli::perftest
