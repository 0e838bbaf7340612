// TransportConfig: the tunables of the transport core, read from TICTAC_* environment variables
// (declared once, in config.cc, with defaults and help text; `tictac info --tunables` lists them):
//   TICTAC_CHUNK_BYTES  (auto)   bytes per chunk: the preemption granularity; auto = measured
//                                rate x TICTAC_CHUNK_TARGET, tuned online (transport/chunk_tuner.h)
//   TICTAC_WINDOW       (auto)   data chunks in flight per backend device; auto = enough to keep
//                                the link full at the measured rate and backend delay
//   TICTAC_CHUNK_TARGET (100us)  auto chunk: how long one chunk takes at the measured rate
//   TICTAC_CHUNK_TARGET_SOLO (1ms) auto chunk while only one priority level is in use (nothing to
//                                pre-empt: longer chunks, less per-chunk work); <= TICTAC_CHUNK_TARGET
//                                turns it off (transport/send_queue.h, "Solo chunks")
//   TICTAC_EAGER_BYTES  (256 KiB) eager pool per peer: messages up to this size are sent without
//                                 waiting for the receiver's READY while credit lasts
//   TICTAC_TIMEOUT      (30s)    connect/handshake timeout and silence after which a peer is dead
//   TICTAC_PRIORITY     (1)      0 = plain FIFO (priorities ignored), for comparisons
//   TICTAC_ADVERTS      (1024)   receives posted before their message is announced are advertised
//                                to the sender (at most this many outstanding per connection), so
//                                the send enters its priority lane at once; 0 turns adverts off
//   TICTAC_INLINE       (1)      a small eager or claimed message travels as one frame (its
//                                ANNOUNCE carries the data); 0 = ANNOUNCE + DATA, for comparisons
//   TICTAC_MAX_UNEXPECTED (65536) messages a peer may have announced that no receive matched yet
//                                 (each costs a descriptor); past it the peer is refused
//   TICTAC_MAX_HANDSHAKES (64)    incoming connections in the handshake at once; more are closed
//   TICTAC_HANDSHAKE_TIMEOUT (10s) an incoming or outgoing handshake must finish within this
//                                 (and within TICTAC_TIMEOUT)
//   TICTAC_AUTH_MAC     (0)      1 = every frame after the handshake carries a 16-byte HMAC tag
//                                (needs TICTAC_AUTH_TOKEN; both sides must agree), see
//                                transport/frame_mac.h and docs/security.md
// Plain value; thread-safe to copy. from_env() reports a bad variable as invalid_argument naming
// it; validate() rejects values out of range.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/status.h"

namespace tictac::transport {

struct TransportConfig {
  // A value set here is fixed unless auto_* is set; from_env() sets auto_* when the variable is
  // unset or "auto" (then chunk_bytes and window_chunks are the values used before the first
  // measurement).
  std::uint64_t chunk_bytes = 1 << 20;
  std::uint32_t window_chunks = 4;
  bool auto_chunk = false;
  bool auto_window = false;
  std::chrono::nanoseconds chunk_target{std::chrono::microseconds(100)};
  std::chrono::nanoseconds solo_chunk_target{std::chrono::milliseconds(1)};
  std::uint64_t solo_chunk_max = 0;  // TICTAC_CHUNK_SOLO_MAX; 0 = each backend's (Capabilities)
  std::uint64_t eager_bytes = 256 << 10;
  std::chrono::milliseconds timeout{30'000};
  bool enforce_priority = true;
  std::uint32_t max_adverts = 1024;  // 0 = never advertise receives
  bool inline_small = true;          // one frame per small eager/claimed message (TICTAC_INLINE)
  std::uint64_t max_unexpected = 65536;
  std::uint32_t max_handshakes = 64;
  std::chrono::milliseconds handshake_timeout{10'000};
  bool frame_mac = false;  // TICTAC_AUTH_MAC: authenticate every frame after the handshake

  // The documented defaults, without reading the environment: auto chunk and window, starting at
  // kAutoStartChunk and kAutoStartWindow. (A plain TransportConfig{} has fixed 1 MiB / 4.)
  static TransportConfig defaults();
  static Result<TransportConfig> from_env();

  static constexpr std::uint64_t kAutoStartChunk = 64 << 10;
  static constexpr std::uint32_t kAutoStartWindow = 2;
  Status validate() const;
};

}  // namespace tictac::transport
