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
  for (;;) {
    if (!failure_.ok()) return failure_;
    if (done()) return Status::Ok();
    const bool woke = cv_.wait_for(lock, idle_limit_, [&] { return events_ != seen; });
    if (!woke) {
      return Status(StatusCode::timeout, "no progress for " + std::to_string(idle_limit_.count()) +
                                             " ms while waiting for " + std::string(what) +
                                             " (is the peer alive? raise --timeout or TICTAC_TIMEOUT)");
    }
    seen = events_;
  }
}

}  // namespace tictac::cli::perftest
