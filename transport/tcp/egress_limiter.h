// EgressLimiter: a token bucket on this process's TCP egress, for emulated clusters without
// kernel shaping (bench/cluster's loopback fallback sets TICTAC_RATE_LIMIT). Like a NIC, one
// bucket is shared by every TCP connection of the process. Burst: max(64 KiB, 2 ms of rate).
// Thread-safe (several Contexts may share the process). Times are passed in, so the bucket is
// deterministic under test.
#pragma once

#include <cstdint>
#include <mutex>

#include "common/status.h"
#include "transport/progress_engine.h"

namespace tictac::transport::tcp {

class EgressLimiter {
 public:
  EgressLimiter(std::uint64_t bytes_per_s, Clock::time_point now);

  // Grants up to `want` bytes now (0 when the bucket is empty); unused grant goes back with
  // give_back().
  std::uint64_t take(std::uint64_t want, Clock::time_point now);
  void give_back(std::uint64_t bytes);
  // When at least min(want, burst) bytes will be available.
  Clock::time_point ready_at(std::uint64_t want, Clock::time_point now);

  std::uint64_t rate() const { return rate_; }
  std::uint64_t burst() const { return burst_; }

  // The process-wide bucket of TICTAC_RATE_LIMIT (bytes/s; unset or 0 = unlimited: nullptr).
  // A malformed value is an invalid_argument naming the variable.
  static Result<EgressLimiter*> process_wide();

 private:
  void refill(Clock::time_point now);

  const std::uint64_t rate_;
  const std::uint64_t burst_;
  std::mutex mu_;
  double tokens_;            // guarded by mu_
  Clock::time_point last_;   // guarded by mu_
};

}  // namespace tictac::transport::tcp
