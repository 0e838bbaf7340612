// ChunkTuner (transport/chunk_tuner.h): the auto chunk size and window from synthetic completion
// times, deterministic (time is passed in). Plus SendQueue with the tuner on (an injected clock)
// and the counter-check that fixed values never move.
#include "transport/chunk_tuner.h"

#include <gtest/gtest.h>

#include "transport/send_queue.h"

#include <functional>
#include <optional>
#include <vector>

namespace tictac::transport {
namespace {

using std::chrono::nanoseconds;

ChunkTunerConfig auto_config() {
  ChunkTunerConfig c;
  c.auto_chunk = true;
  c.auto_window = true;
  c.chunk_bytes = 256 << 10;
  c.window_chunks = 2;
  c.target = std::chrono::microseconds(500);
  return c;  // chunks 64K..8M, windows 2..64
}

// auto_config() with the default targets: 100 us chunks, 1 ms solo chunks.
ChunkTunerConfig default_targets() {
  ChunkTunerConfig c = auto_config();
  c.target = std::chrono::microseconds(100);
  c.solo_target = std::chrono::milliseconds(1);
  return c;
}

// A backlogged link of `rate` bytes/s: each chunk of the tuner's current size completes one
// transmission time after the previous one, `extra` after it was popped beyond its own
// transmission (the backend's delay). Returns the time after the last completion.
nanoseconds feed(ChunkTuner& t, double rate, nanoseconds start, int chunks,
                 nanoseconds extra = nanoseconds{0}) {
  nanoseconds now = start;
  for (int i = 0; i < chunks; ++i) {
    const std::uint64_t bytes = t.chunk_bytes();
    const auto tx = nanoseconds(static_cast<std::int64_t>(static_cast<double>(bytes) / rate * 1e9));
    now += tx;
    t.on_done(bytes, 0, now - tx - extra, now, true);
  }
  return now;
}

TEST(ChunkTuner, OneGbitLinkGetsSmallChunksAndTheMinimumWindow) {
  ChunkTuner t(auto_config());
  EXPECT_EQ(t.chunk_bytes(), 256u << 10);  // the initial values until the first sample
  EXPECT_EQ(t.window_chunks(), 2u);
  feed(t, 125e6, nanoseconds{0}, 40);
  EXPECT_GE(t.samples(), 1u);
  EXPECT_NEAR(t.rate_bytes_per_s(), 125e6, 125e4);
  EXPECT_EQ(t.chunk_bytes(), 64u << 10);  // 125 MB/s x 500 us = 62.5 KB -> 64 KiB
  // No backend delay beyond the transmission, and a 64 KiB chunk takes 524 us (>= long_chunk):
  // one chunk in flight.
  EXPECT_EQ(t.window_chunks(), 1u);
}

// Long chunks (ChunkTunerConfig::long_chunk): at 1 Gbit/s even the smallest chunk takes 524 us,
// so there are no solo chunks and one chunk in flight; at 2.26 Gbit/s (232 us) both stay, and a
// backend delay still widens the window on a slow link.
TEST(ChunkTuner, LongChunksOnASlowLinkMeanNoSoloChunksAndOneInFlight) {
  ChunkTunerConfig c = default_targets();
  ChunkTuner slow(c);
  feed(slow, 125e6, nanoseconds{0}, 100);
  EXPECT_EQ(slow.chunk_bytes(), 64u << 10);
  EXPECT_EQ(slow.solo_chunk_bytes(), 64u << 10);  // not 128 KiB (125 MB/s x 1 ms)
  EXPECT_EQ(slow.window_chunks(), 1u);
  // Counter-check: a faster link whose 64 KiB chunk takes less than long_chunk keeps both.
  ChunkTuner faster(c);
  feed(faster, 282e6, nanoseconds{0}, 200);
  EXPECT_EQ(faster.chunk_bytes(), 64u << 10);
  EXPECT_EQ(faster.solo_chunk_bytes(), 256u << 10);  // 282 MB/s x 1 ms
  EXPECT_EQ(faster.window_chunks(), 2u);
  // The delay rule still applies on a slow link: 1 ms of delay at 524 us a chunk -> 1 + 2.
  ChunkTuner delayed(c);
  feed(delayed, 125e6, nanoseconds{0}, 100, std::chrono::milliseconds(1));
  EXPECT_EQ(delayed.window_chunks(), 3u);
}

TEST(ChunkTuner, TheDefaultTargetIs100Microseconds) {
  ChunkTunerConfig c = auto_config();
  c.target = ChunkTunerConfig{}.target;
  ChunkTuner t(c);
  feed(t, 3.5e9, nanoseconds{0}, 400);  // loopback TCP: 350 KB -> 256 KiB
  EXPECT_EQ(t.chunk_bytes(), 256u << 10);
}

TEST(ChunkTuner, FastLinkGrowsTheChunk) {
  ChunkTuner t(auto_config());
  feed(t, 4e9, nanoseconds{0}, 200);
  EXPECT_NEAR(t.rate_bytes_per_s(), 4e9, 4e7);
  EXPECT_EQ(t.chunk_bytes(), 2u << 20);  // 4 GB/s x 500 us = 2 MB -> 2 MiB
}

TEST(ChunkTuner, BackendDelayWidensTheWindowToCoverIt) {
  ChunkTuner t(auto_config());
  // 1.6 GB/s, 1 ms of delay per chunk (a round trip before completion): chunk 800 KB -> 1 MiB
  // (0.66 ms), window 1 + ceil(1 / 0.66) = 3 keeps the link full.
  feed(t, 1.6e9, nanoseconds{0}, 100, std::chrono::milliseconds(1));
  EXPECT_EQ(t.chunk_bytes(), 1u << 20);
  EXPECT_EQ(t.window_chunks(), 3u);
}

TEST(ChunkTuner, QueueingBehindTheWindowIsNotBackendDelay) {
  ChunkTuner t(auto_config());
  // 125 MB/s with 3 chunks ahead of each one: it completes 4 transmission times after its pop,
  // all of it queueing (as on TCP, where a chunk waits for the socket to drain).
  nanoseconds now{0};
  for (int i = 0; i < 60; ++i) {
    const std::uint64_t bytes = t.chunk_bytes();
    const auto tx =
        nanoseconds(static_cast<std::int64_t>(static_cast<double>(bytes) / 125e6 * 1e9));
    now += tx;
    t.on_done(bytes, 3 * bytes, now - 4 * tx, now, true);
  }
  EXPECT_LT(t.backend_delay(), std::chrono::microseconds(50));
  EXPECT_EQ(t.window_chunks(), 1u);  // the minimum for 524 us chunks (long_chunk), not 4
}

TEST(ChunkTuner, AdaptsOnlineWhenTheRateChanges) {
  ChunkTuner t(auto_config());
  nanoseconds now = feed(t, 4e9, nanoseconds{0}, 200);
  ASSERT_EQ(t.chunk_bytes(), 2u << 20);
  feed(t, 125e6, now, 200);  // the link slowed down 32x (e.g. another flow took it)
  EXPECT_LT(t.rate_bytes_per_s(), 130e6);
  EXPECT_EQ(t.chunk_bytes(), 64u << 10);
}

TEST(ChunkTuner, IdleGapsDoNotReadAsASlowLink) {
  ChunkTuner t(auto_config());
  // Bursts of 8 chunks at 2 GB/s with 100 ms of idleness (nothing queued) between bursts.
  nanoseconds now{0};
  for (int burst = 0; burst < 20; ++burst) {
    for (int i = 0; i < 8; ++i) {
      const std::uint64_t bytes = t.chunk_bytes();
      const auto tx =
          nanoseconds(static_cast<std::int64_t>(static_cast<double>(bytes) / 2e9 * 1e9));
      now += tx;
      t.on_done(bytes, 0, now - tx, now, i < 7);  // the burst's last chunk leaves the device idle
    }
    now += std::chrono::milliseconds(100);
  }
  EXPECT_GE(t.samples(), 1u);
  EXPECT_NEAR(t.rate_bytes_per_s(), 2e9, 2e8);  // counting the gaps would give ~20 MB/s
  EXPECT_EQ(t.chunk_bytes(), 1u << 20);
}

TEST(ChunkTuner, HysteresisKeepsTheChunkWhenTheIdealIsWithinAFactorOfTwo) {
  ChunkTuner t(auto_config());
  nanoseconds now = feed(t, 2e9, nanoseconds{0}, 200);  // 1 MB -> 1 MiB
  ASSERT_EQ(t.chunk_bytes(), 1u << 20);
  for (int i = 0; i < 10; ++i) {
    now = feed(t, i % 2 ? 2.8e9 : 1.4e9, now, 30);  // +-40 %: ideal 0.7 .. 1.4 MB
    EXPECT_EQ(t.chunk_bytes(), 1u << 20) << "round " << i;
  }
}

TEST(ChunkTuner, ClampsToTheBounds) {
  ChunkTuner fast(auto_config());
  feed(fast, 100e9, nanoseconds{0}, 4000);
  EXPECT_EQ(fast.chunk_bytes(), 8u << 20);
  ChunkTuner slow(auto_config());
  feed(slow, 1e6, nanoseconds{0}, 20);
  EXPECT_EQ(slow.chunk_bytes(), 64u << 10);
  ChunkTuner delayed(auto_config());
  feed(delayed, 1e9, nanoseconds{0}, 100, std::chrono::seconds(1));
  EXPECT_EQ(delayed.window_chunks(), 64u);
}

TEST(ChunkTuner, FixedValuesNeverMove) {
  ChunkTunerConfig c = auto_config();
  c.auto_chunk = false;
  c.auto_window = false;
  ChunkTuner t(c);
  feed(t, 125e6, nanoseconds{0}, 100, std::chrono::milliseconds(5));
  EXPECT_EQ(t.chunk_bytes(), 256u << 10);
  EXPECT_EQ(t.window_chunks(), 2u);
  // Each auto on its own: the other stays fixed.
  c.auto_chunk = true;
  ChunkTuner only_chunk(c);
  feed(only_chunk, 125e6, nanoseconds{0}, 100, std::chrono::milliseconds(5));
  EXPECT_EQ(only_chunk.chunk_bytes(), 64u << 10);
  EXPECT_EQ(only_chunk.window_chunks(), 2u);
}

// A SendQueue config starting at `chunk` with a window of 2, both auto or both fixed, on `clock`.
SendQueueConfig queue_config(std::uint64_t chunk, bool auto_tune, nanoseconds solo_target,
                             nanoseconds& clock) {
  SendQueueConfig c;
  c.chunk_bytes = chunk;
  c.window_chunks = 2;
  c.auto_chunk = auto_tune;
  c.auto_window = auto_tune;
  c.solo_chunk_target = solo_target;
  c.clock = [&clock] { return clock; };
  return c;
}

// Runs `q` against a backlogged link of `rate` bytes/s until it is empty: pops what the window
// allows, completes the oldest chunk one transmission time later (advancing `clock`), and reports
// it. `before_pop` runs at the top of every step (to push more at some time).
void drive(SendQueue& q, nanoseconds& clock, double rate, const std::function<void()>& before_pop,
           const std::function<void(const Chunk&)>& done_fn) {
  std::vector<Chunk> in_flight;
  for (int guard = 0; guard < 1000000 && (!q.empty() || !in_flight.empty()); ++guard) {
    if (before_pop) before_pop();
    while (auto chunk = q.pop({})) in_flight.push_back(*chunk);
    if (in_flight.empty()) break;
    const Chunk done = in_flight.front();
    in_flight.erase(in_flight.begin());
    clock += nanoseconds(static_cast<std::int64_t>(static_cast<double>(done.length) / rate * 1e9));
    q.on_chunk_done(done);
    done_fn(done);
  }
}

// SendQueue with the tuner: chunks popped from a long message shrink once the completions show a
// 1 Gbit/s link; with fixed values (the counter-check) they keep their size.
std::vector<std::uint64_t> chunk_lengths(bool auto_tune) {
  nanoseconds clock{0};
  // Solo chunks off (their target at the normal one): the normal size alone (tested below).
  SendQueue q(queue_config(256 << 10, auto_tune, std::chrono::microseconds(100), clock));
  q.push(1, 7, 0, 16 << 20);
  q.push(1, 8, 0, 1 << 20, /*whole=*/true);  // an inline message: never cut
  std::vector<std::uint64_t> lengths;
  drive(q, clock, 125e6, {}, [&](const Chunk& done) { lengths.push_back(done.length); });
  return lengths;
}

TEST(SendQueueTuned, ChunksShrinkOnASlowLinkAndWholeMessagesStayWhole) {
  const std::vector<std::uint64_t> tuned = chunk_lengths(true);
  ASSERT_FALSE(tuned.empty());
  EXPECT_EQ(tuned.front(), 256u << 10);
  EXPECT_EQ(tuned[tuned.size() - 2], 64u << 10);                  // the long message's tail, tuned
  EXPECT_EQ(tuned.back(), 1u << 20);                              // the whole message, one chunk
  const std::vector<std::uint64_t> fixed = chunk_lengths(false);  // counter-check
  for (std::size_t i = 0; i + 1 < fixed.size(); ++i) EXPECT_EQ(fixed[i], 256u << 10) << i;
  EXPECT_EQ(fixed.back(), 1u << 20);
}

// The solo window: one solo chunk in flight where its time covers the backend's delay (a 1 ms
// chunk on TCP), more where completion waits for a longer delay; a fixed window is kept.
TEST(ChunkTuner, SoloWindowCoversTheDelayWithSoloChunks) {
  ChunkTunerConfig c = default_targets();
  ChunkTuner tcp(c);
  feed(tcp, 1e9, nanoseconds{0}, 400);
  EXPECT_EQ(tcp.window_chunks(), 2u);       // 128 KiB chunks take 131 us: the floor of 2
  EXPECT_EQ(tcp.solo_window_chunks(), 1u);  // 1 MiB solo chunks take 1 ms
  ChunkTuner delayed(c);
  feed(delayed, 1e9, nanoseconds{0}, 400, std::chrono::microseconds(1500));
  EXPECT_EQ(delayed.solo_window_chunks(), 3u);  // 1 + ceil(1.5 ms / 1.05 ms)
  c.auto_window = false;  // counter-check: a fixed window is the solo window too
  ChunkTuner fixed(c);
  feed(fixed, 1e9, nanoseconds{0}, 400);
  EXPECT_EQ(fixed.solo_window_chunks(), 2u);
}

TEST(ChunkTuner, SoloChunkIsTheRateTimesTheSoloTarget) {
  ChunkTunerConfig c = default_targets();
  ChunkTuner t(c);
  EXPECT_EQ(t.solo_chunk_bytes(), 256u << 10);  // the initial value until the first sample
  feed(t, 1e9, nanoseconds{0}, 400);
  EXPECT_EQ(t.chunk_bytes(), 128u << 10);      // 1 GB/s x 100 us = 100 KB
  EXPECT_EQ(t.solo_chunk_bytes(), 1u << 20);   // 1 GB/s x 1 ms = 1 MB
  c.auto_chunk = false;                        // counter-check: a fixed chunk is the solo chunk too
  ChunkTuner fixed(c);
  feed(fixed, 1e9, nanoseconds{0}, 400);
  EXPECT_EQ(fixed.solo_chunk_bytes(), 256u << 10);
}

// max_solo_chunk caps the solo chunk on a fast link (4 GB/s x 1 ms = 4 MB), never below the
// chunk, and the solo window follows the capped size.
TEST(ChunkTuner, SoloChunkStopsAtItsMaximum) {
  ChunkTunerConfig c = default_targets();
  c.max_solo_chunk = 1 << 20;
  ChunkTuner capped(c);
  feed(capped, 4e9, nanoseconds{0}, 800);
  EXPECT_EQ(capped.chunk_bytes(), 256u << 10);     // 400 KB ideal, within the hysteresis
  EXPECT_EQ(capped.solo_chunk_bytes(), 1u << 20);  // not 4 MiB
  EXPECT_EQ(capped.solo_window_chunks(), 2u);      // a 1 MiB chunk (262 us) is not long
  c.max_solo_chunk = 128 << 10;                    // below the chunk: the chunk wins
  ChunkTuner below(c);
  feed(below, 4e9, nanoseconds{0}, 800);
  EXPECT_EQ(below.solo_chunk_bytes(), 256u << 10);
  c.max_solo_chunk = 8 << 20;  // counter-check: the default bound leaves rate x 1 ms
  ChunkTuner open(c);
  feed(open, 4e9, nanoseconds{0}, 800);
  EXPECT_EQ(open.solo_chunk_bytes(), 4u << 20);
}

// SendQueue solo chunks: a 1 GB/s link carrying a long message of one priority level, with an
// optional message of another level pushed at `mixed_at`. Returns (completion time, length) of
// every chunk of the long message (id 7).
struct Popped {
  nanoseconds done;
  std::uint64_t length;
};
std::vector<Popped> solo_run(std::chrono::nanoseconds solo_target,
                             std::optional<nanoseconds> mixed_at = std::nullopt, bool enforce = true) {
  nanoseconds clock{0};
  SendQueueConfig c = queue_config(64 << 10, true, solo_target, clock);
  c.enforce_priority = enforce;
  SendQueue q(c);
  q.push(1, 7, 5, 400 << 20);  // 400 ms at 1 GB/s
  std::vector<Popped> out;
  bool pushed = false;
  auto mix = [&] {
    if (mixed_at && !pushed && clock >= *mixed_at) {
      q.push(2, 8, 9, 64 << 20);  // another level, behind the first: no pre-emption, but mixed
      pushed = true;
    }
  };
  drive(q, clock, 1e9, mix, [&](const Chunk& done) {
    if (done.message == 7) out.push_back({clock, done.length});
  });
  return out;
}

std::uint64_t length_at(const std::vector<Popped>& run, nanoseconds t) {
  for (const Popped& p : run)
    if (p.done >= t) return p.length;
  return 0;
}

TEST(SendQueueTuned, OneLevelForFiftyMillisecondsGetsSoloChunks) {
  const auto run = solo_run(std::chrono::milliseconds(1));
  ASSERT_FALSE(run.empty());
  EXPECT_EQ(length_at(run, std::chrono::milliseconds(20)), 64u << 10);  // normal until 50 ms (1 GB/s x 100 us = 100 KB: within 2x of the 64 KiB start)
  EXPECT_EQ(length_at(run, std::chrono::milliseconds(100)), 1u << 20);   // then 1 GB/s x 1 ms
  // Counter-check: with the solo target at the normal one, chunks stay at the normal size.
  const auto off = solo_run(std::chrono::microseconds(100));
  EXPECT_EQ(length_at(off, std::chrono::milliseconds(100)), 64u << 10);
  EXPECT_EQ(length_at(off, std::chrono::milliseconds(350)), 64u << 10);
}

TEST(SendQueueTuned, AnotherLevelEndsSoloChunksAtOnce) {
  const auto run = solo_run(std::chrono::milliseconds(1), std::chrono::milliseconds(150));
  EXPECT_EQ(length_at(run, std::chrono::milliseconds(140)), 1u << 20);
  // From the push on, two levels are queued: normal chunks (the first completion after the push
  // may still be a solo chunk popped before it; the solo window holds one).
  EXPECT_EQ(length_at(run, std::chrono::milliseconds(155)), 64u << 10);
  EXPECT_EQ(length_at(run, std::chrono::milliseconds(300)), 64u << 10);
}

// FIFO mode (TICTAC_PRIORITY=0) serves one level but follows the priorities given: the same
// traffic cuts the same chunks as with priorities on, so a FIFO baseline differs only in order.
TEST(SendQueueTuned, FifoModeEndsSoloChunksOnAnotherPriorityToo) {
  const auto run = solo_run(std::chrono::milliseconds(1), std::chrono::milliseconds(150), false);
  EXPECT_EQ(length_at(run, std::chrono::milliseconds(140)), 1u << 20);
  EXPECT_EQ(length_at(run, std::chrono::milliseconds(155)), 64u << 10);
  const auto one = solo_run(std::chrono::milliseconds(1), std::nullopt, false);
  EXPECT_EQ(length_at(one, std::chrono::milliseconds(155)), 1u << 20);  // one priority: solo
}

TEST(SendQueueTuned, FixedChunksHaveNoSoloMode) {
  nanoseconds clock{0};
  SendQueueConfig c;
  c.chunk_bytes = 64 << 10;
  c.clock = [&clock] { return clock; };
  SendQueue q(c);
  q.push(1, 7, 0, 64 << 20);
  clock += std::chrono::seconds(1);
  EXPECT_FALSE(q.solo());
  auto chunk = q.pop({});
  ASSERT_TRUE(chunk.has_value());
  EXPECT_EQ(chunk->length, 64u << 10);
}

}  // namespace
}  // namespace tictac::transport
