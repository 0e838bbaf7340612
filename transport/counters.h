// TransportCounters: process-wide protocol counters, for diagnostics and tests (how often a
// receive had to answer an ANNOUNCE with READY, against how often the message came straight
// into an advertised receive). Relaxed atomics, bumped on loop threads, read from any thread;
// never reset (read a difference).
#pragma once

#include <atomic>
#include <cstdint>

namespace tictac::transport {

struct TransportCounters {
  // READY frames sent: a rendezvous message met its receive only at (or after) its ANNOUNCE, and
  // its data waited a round trip.
  std::atomic<std::uint64_t> readies_sent{0};
  // Messages that arrived claiming an advertised receive (ANNOUNCE with kFlagClaimed): the
  // sender knew the receive was posted, and sent the data at once.
  std::atomic<std::uint64_t> claimed_received{0};
};

inline TransportCounters& transport_counters() {
  static TransportCounters counters;
  return counters;
}

}  // namespace tictac::transport
