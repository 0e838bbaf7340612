// TransportCounters: process-wide protocol counters, for diagnostics and tests (how often a
// receive had to answer an ANNOUNCE with READY, against how often the message came straight
// into an advertised receive). Relaxed atomics, bumped on loop threads, read from any thread;
// never reset (read a difference). describe_counters() prints them; a Context logs that line
// at info level when it is joined (TICTAC_LOG_LEVEL=info).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <string>

namespace tictac::transport {

struct TransportCounters {
  // READY frames sent: a rendezvous message met its receive only at (or after) its ANNOUNCE, and
  // its data waited a round trip.
  std::atomic<std::uint64_t> readies_sent{0};
  // Messages that arrived claiming an advertised receive (ANNOUNCE with kFlagClaimed): the
  // sender knew the receive was posted, and sent the data at once.
  std::atomic<std::uint64_t> claimed_received{0};
  // DATA frames sent, by payload size: entry k counts payloads of [2^k, 2^(k+1)) bytes (what
  // the send queue's chunking, solo chunks included, put on the wire).
  static constexpr int kSizeClasses = 32;
  // TCP lanes (transport/tcp/lanes.h): endpoints whose second socket came up (each side counts
  // its own), frames posted on lane 1, messages that moved the stream to the other lane, times a
  // reader held a frame for the other lane, and the nanoseconds it was held in all.
  std::atomic<std::uint64_t> tcp_lanes_up{0};
  std::atomic<std::uint64_t> tcp_lane1_frames{0};
  std::atomic<std::uint64_t> tcp_lane_switches{0};
  std::atomic<std::uint64_t> tcp_lane_barrier_waits{0};
  std::atomic<std::uint64_t> tcp_lane_barrier_wait_ns{0};
  std::atomic<std::uint64_t> data_frames_by_log2[kSizeClasses] = {};

  void count_data_frame(std::uint64_t payload_bytes) {
    const int k =
        std::min(static_cast<int>(std::bit_width(payload_bytes | 1)) - 1, kSizeClasses - 1);
    data_frames_by_log2[k].fetch_add(1, std::memory_order_relaxed);
  }
};

inline TransportCounters& transport_counters() {
  static TransportCounters counters;
  return counters;
}

// One line, "name=value" pairs: every counter, and the DATA frames by payload size as
// "data_frames=[lo-hi)B:n,..." over the non-empty classes.
std::string describe_counters(const TransportCounters& counters);

}  // namespace tictac::transport
