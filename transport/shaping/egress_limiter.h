// EgressLimiter: an emulated link of a fixed rate for this process's egress, for emulated
// clusters without kernel shaping (bench/cluster's loopback fallback sets TICTAC_RATE_LIMIT).
// Like a NIC, one link is shared by every shaped connection of the process.
//
// Model (a virtual clock, i.e. a token bucket whose tokens are link time): the link is busy
// until free_at; reserving a frame of n bytes appends n / rate to it (from now, if the link was
// idle) and says when the frame may be handed to the socket: burst() / rate before the link
// would have finished sending it. So after idle time up to burst() bytes go at once, a frame
// larger than the burst waits for most of its own transmission time, and over a long transfer
// the bytes leave at the rate. Reservations are never cancelled (a closed connection's
// reserved time is simply spent).
// Thread-safe (several Contexts may share the process). Times are passed in, so the clock is
// deterministic under test.
#pragma once

#include <cstdint>
#include <mutex>

#include "common/status.h"
#include "transport/progress_engine.h"

namespace tictac::transport::shaping {

class EgressLimiter {
 public:
  // Burst: max(64 KiB, 5 ms of the rate). `bytes_per_s` > 0.
  EgressLimiter(std::uint64_t bytes_per_s, Clock::time_point now);

  // Reserves the link for `bytes` and returns when they may be handed to the socket (`now` or
  // later).
  Clock::time_point reserve(std::uint64_t bytes, Clock::time_point now);

  std::uint64_t rate() const { return rate_; }
  std::uint64_t burst() const { return burst_; }

  // The process-wide link of TICTAC_RATE_LIMIT (bytes/s; unset or 0 = unlimited: nullptr).
  // A malformed value is an invalid_argument naming the variable.
  static Result<EgressLimiter*> process_wide();

 private:
  Clock::duration time_of(std::uint64_t bytes) const;

  const std::uint64_t rate_;
  const std::uint64_t burst_;
  std::mutex mu_;
  Clock::time_point free_at_;  // guarded by mu_: when the link has sent all reserved bytes
};

}  // namespace tictac::transport::shaping
