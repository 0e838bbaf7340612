#include "transport/tcp/egress_limiter.h"

#include <algorithm>
#include <memory>

#include "common/tunables.h"

namespace tictac::transport::tcp {
namespace {

const SizeTunable kRateLimit{"TICTAC_RATE_LIMIT", 0,
                             "TCP egress limit of this process in bytes/s (e.g. 125M = 1 Gbit/s), "
                             "shared by all its connections; 0 = unlimited"};

}  // namespace

EgressLimiter::EgressLimiter(std::uint64_t bytes_per_s, Clock::time_point now)
    : rate_(bytes_per_s),
      burst_(std::max<std::uint64_t>(64 << 10, bytes_per_s / 500)),
      tokens_(static_cast<double>(burst_)),
      last_(now) {}

void EgressLimiter::refill(Clock::time_point now) {
  if (now <= last_) return;
  const double dt = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(static_cast<double>(burst_), tokens_ + dt * static_cast<double>(rate_));
  last_ = now;
}

std::uint64_t EgressLimiter::take(std::uint64_t want, Clock::time_point now) {
  std::lock_guard lock(mu_);
  refill(now);
  const auto granted = std::min<std::uint64_t>(want, static_cast<std::uint64_t>(tokens_));
  tokens_ -= static_cast<double>(granted);
  return granted;
}

void EgressLimiter::give_back(std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  tokens_ = std::min(static_cast<double>(burst_), tokens_ + static_cast<double>(bytes));
}

Clock::time_point EgressLimiter::ready_at(std::uint64_t want, Clock::time_point now) {
  std::lock_guard lock(mu_);
  refill(now);
  const double need = static_cast<double>(std::min(want, burst_)) - tokens_;
  if (need <= 0) return now;
  return now + std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>(need / static_cast<double>(rate_)));
}

Result<EgressLimiter*> EgressLimiter::process_wide() {
  Result<std::uint64_t> rate = kRateLimit.get();
  if (!rate.ok()) return rate.status();
  if (*rate == 0) return static_cast<EgressLimiter*>(nullptr);
  static std::mutex mu;
  static std::unique_ptr<EgressLimiter> limiter;
  std::lock_guard lock(mu);
  if (!limiter || limiter->rate() != *rate) {
    // A changed rate (tests) gets a new bucket; the old one stays alive for endpoints using it.
    static std::vector<std::unique_ptr<EgressLimiter>> retired;
    if (limiter) retired.push_back(std::move(limiter));
    limiter = std::make_unique<EgressLimiter>(*rate, Clock::now());
  }
  return limiter.get();
}

}  // namespace tictac::transport::tcp
