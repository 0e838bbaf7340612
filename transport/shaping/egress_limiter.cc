#include "transport/shaping/egress_limiter.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "common/tunables.h"

namespace tictac::transport::shaping {
namespace {

const SizeTunable kRateLimit{"TICTAC_RATE_LIMIT", 0,
                             "TCP egress limit of this process in bytes/s (e.g. 125M = 1 Gbit/s), "
                             "shared by all its connections; 0 = unlimited"};

}  // namespace

EgressLimiter::EgressLimiter(std::uint64_t bytes_per_s, Clock::time_point now)
    : rate_(std::max<std::uint64_t>(1, bytes_per_s)),
      burst_(std::max<std::uint64_t>(64 << 10, rate_ / 200)),
      free_at_(now) {}

Clock::duration EgressLimiter::time_of(std::uint64_t bytes) const {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / static_cast<double>(rate_)));
}

Clock::time_point EgressLimiter::reserve(std::uint64_t bytes, Clock::time_point now) {
  std::lock_guard lock(mu_);
  free_at_ = std::max(free_at_, now) + time_of(bytes);
  return std::max(now, free_at_ - time_of(burst_));
}

Result<EgressLimiter*> EgressLimiter::process_wide() {
  Result<std::uint64_t> rate = kRateLimit.get();
  if (!rate.ok()) return rate.status();
  if (*rate == 0) return static_cast<EgressLimiter*>(nullptr);
  static std::mutex mu;
  static std::unique_ptr<EgressLimiter> limiter;
  std::lock_guard lock(mu);
  if (!limiter || limiter->rate() != *rate) {
    // A changed rate (tests) gets a new link; the old one stays alive for endpoints using it.
    static std::vector<std::unique_ptr<EgressLimiter>> retired;
    if (limiter) retired.push_back(std::move(limiter));
    limiter = std::make_unique<EgressLimiter>(*rate, Clock::now());
  }
  return limiter.get();
}

}  // namespace tictac::transport::shaping
