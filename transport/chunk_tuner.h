// ChunkTuner: chooses a SendQueue's chunk size and in-flight window from what its completions
// show, the default ("auto") behind TICTAC_CHUNK_BYTES and TICTAC_WINDOW.
//
// Inputs: for every completed data chunk, its size, when it was handed to the backend (popped),
// when the backend completed it, and whether the device still had work (chunks in flight or data
// queued) right after. Estimates, per sample of at least `sample_period` of busy time and
// `sample_chunks` completions:
//  - rate: bytes completed over busy time (intervals between completions that began with the
//    device busy; idle gaps are not counted, so an application that sends little does not read as
//    a slow link). Smoothed: new = (old + sample) / 2.
//  - backend delay: the smallest, over the sample, of a chunk's pop-to-completion time minus the
//    time the link needed for it and the bytes in flight ahead of it at the sampled rate (what is
//    left is the backend's own delay: the round trip where completion means delivery; about 0 on
//    TCP, whose chunk completes once the kernel took it).
// Choices (each only where auto; a fixed value is never changed):
//  - chunk = rate x `target` (the pre-emption latency one chunk adds), rounded to a power of two
//    and clamped to [min_chunk, max_chunk]; changed only when the ideal size leaves
//    (chunk / 2, chunk x 2) (hysteresis: no flapping between neighbouring powers of two).
//  - solo chunk = rate x `solo_target`, rounded and clamped the same way, then at most
//    `max_solo_chunk` (but never below the chunk): the size a SendQueue
//    uses while only one priority level is in use (nothing to pre-empt, so a longer chunk costs no
//    latency and saves per-chunk work; see send_queue.h).
//  - window = 1 + ceil(delay / chunk time), clamped to [min_window (2), max_window]: enough
//    chunks that the ones still in flight cover the backend's delay and the link stays full, no
//    more (every extra chunk in flight adds one chunk time of pre-emption latency). At least 2:
//    the next chunk is ready while one completes, which covers the loop's own turnaround (with
//    one, 64 KiB chunks on loopback TCP lost 40 % of the bandwidth; docs/benchmarks.md).
//  - Long chunks: where even the chosen chunk takes at least `long_chunk` (400 us) at the rate
//    (a slow link, where min_chunk is above rate x target), per-chunk costs and the loop's
//    turnaround are small against a chunk's time, so neither solo chunks nor a second chunk in
//    flight buys bandwidth; both would only add whole chunk times of pre-emption latency. There
//    the solo chunk is the chunk and the window's floor is 1 (the delay rule above still applies:
//    a backend whose completion waits for delivery keeps 1 + ceil(delay / chunk time)).
//  - solo window = the same rule for solo chunks (1 + ceil(delay / solo chunk time), floor 1 when
//    a solo chunk takes at least long_chunk, as it does at the default 1 ms target): the window
//    a SendQueue uses while it cuts solo chunks. One 1 ms chunk in flight keeps a TCP link full
//    (the socket's own buffer covers the turnaround) and halves what a new level waits behind.
//    The window when the window is fixed.
// Before the first sample the initial (configured) values apply. Deterministic: time is passed
// in. Not thread-safe (owned by its SendQueue, on the loop thread).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace tictac::transport {

// The largest solo chunk where neither TICTAC_CHUNK_SOLO_MAX nor the backend says otherwise.
inline constexpr std::uint64_t kDefaultSoloChunkMax = 8 << 20;

struct ChunkTunerConfig {
  bool auto_chunk = false;
  bool auto_window = false;
  std::uint64_t chunk_bytes = 1 << 20;  // fixed value, or the initial one when auto
  std::uint32_t window_chunks = 4;      // fixed value, or the initial one when auto
  std::chrono::nanoseconds target{std::chrono::microseconds(100)};
  std::chrono::nanoseconds solo_target{std::chrono::milliseconds(1)};
  std::uint64_t min_chunk = 64 << 10;
  std::uint64_t max_chunk = 8 << 20;
  std::uint64_t max_solo_chunk =
      kDefaultSoloChunkMax;  // solo chunks never above this (nor below the chunk)
  std::uint32_t min_window = 2;
  std::chrono::nanoseconds long_chunk{std::chrono::microseconds(400)};
  std::uint32_t max_window = 64;
  std::chrono::nanoseconds sample_period{std::chrono::milliseconds(2)};
  std::uint32_t sample_chunks = 4;
};

class ChunkTuner {
 public:
  using Time = std::chrono::nanoseconds;  // any monotonic clock's time since its epoch

  explicit ChunkTuner(ChunkTunerConfig config);

  // One data chunk of `bytes`, popped at `popped` with `ahead_bytes` in flight before it,
  // completed at `done`; `busy_after`: chunks still in flight or data still queued on the device
  // after this completion.
  void on_done(std::uint64_t bytes, std::uint64_t ahead_bytes, Time popped, Time done,
               bool busy_after);

  std::uint64_t chunk_bytes() const { return chunk_; }
  // The chunk for single-level traffic: the initial value until the first sample, then rate x
  // solo_target (never below chunk_bytes()). Equal to chunk_bytes() when the chunk is fixed.
  std::uint64_t solo_chunk_bytes() const { return std::max(solo_chunk_, chunk_); }
  std::uint32_t window_chunks() const { return window_; }
  std::uint32_t solo_window_chunks() const { return solo_window_; }
  double rate_bytes_per_s() const { return rate_; }  // 0 until the first sample
  Time backend_delay() const { return base_; }
  std::uint64_t samples() const { return samples_; }
  const ChunkTunerConfig& config() const { return config_; }

 private:
  void finish_sample();
  // Moves `chunk` to the power of two nearest to `ideal` bytes when `ideal` left (chunk/2, chunk*2).
  void retune(std::uint64_t& chunk, double ideal) const;
  // The window rule above for chunks of `chunk_s` seconds at the current rate.
  std::uint32_t window_for(double delay_s, double chunk_s) const;
  bool is_long(double chunk_s) const;  // a chunk of chunk_s seconds is a long chunk (above)

  ChunkTunerConfig config_;
  std::uint64_t chunk_;
  std::uint64_t solo_chunk_;
  std::uint32_t window_;
  std::uint32_t solo_window_;
  double rate_ = 0;
  Time base_{0};
  std::uint64_t samples_ = 0;
  // Current sample.
  bool have_last_ = false;
  bool last_busy_ = false;
  Time last_done_{0};
  std::uint64_t acc_bytes_ = 0;
  Time acc_time_{0};
  std::uint32_t acc_chunks_ = 0;
  struct Seen {
    Time latency;
    std::uint64_t through;  // the chunk's bytes plus those ahead of it
  };
  std::vector<Seen> seen_;  // this sample's chunks (at most kMaxSeen)
};

}  // namespace tictac::transport
