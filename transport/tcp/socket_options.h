// Socket set-up shared by the TCP backend's objects (internal). Pure helpers; thread-safe.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace tictac::transport::tcp {

// Non-blocking, close-on-exec IPv4 stream socket.
Result<int> new_socket();
// TCP_NODELAY (frames are already batched by the core), keepalive and the initial
// TCP_NOTSENT_LOWAT; errors are returned.
Status tune_connected(int fd);

// TICTAC_TCP_NOTSENT_LOWAT: auto (the default), or a fixed number of bytes (0 = the kernel's
// default, unbounded). invalid_argument names the variable for anything else.
struct NotsentLowat {
  bool automatic = true;
  std::uint64_t bytes = 0;  // the fixed value when !automatic
};
Result<NotsentLowat> notsent_lowat_from_env();
// Auto: the kernel keeps at most about one chunk unsent (the chunk size the socket is given,
// rounded up to a power of two, within [kMinAutoLowat, kMaxAutoLowat]): large for solo chunks
// (nothing to pre-empt; a blocked sender sleeps and wakes less: loopback 2.4-2.9 -> 4.2-5.0 GB/s).
// Never below the old fixed 256 KiB: a 64 KiB floor (0.5 ms at 1 Gbit/s instead of 2 ms) made
// emulated PS training about 9% slower in one pair of runs (1455 vs 1306-1363 ms per iteration)
// on this CPU-bound 2-core VM, so that trade-off is left for a measurement on a GPU host.
inline constexpr std::uint64_t kMinAutoLowat = 256 << 10;
inline constexpr std::uint64_t kMaxAutoLowat = 16 << 20;
inline constexpr std::uint64_t kAutoLowatStart = 256 << 10;  // before the first data frame
std::uint64_t auto_notsent_lowat(std::uint64_t chunk_bytes);
Status set_notsent_lowat(int fd, std::uint64_t bytes);

}  // namespace tictac::transport::tcp
