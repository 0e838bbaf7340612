// TICTAC_RATE_LIMIT: the token bucket with explicit times, and a real TCP transfer it slows.
#include "transport/tcp/egress_limiter.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <thread>
#include <vector>

#include "transport/context.h"

namespace tictac::transport::tcp {
namespace {

using namespace std::chrono_literals;

TEST(EgressLimiter, BucketGrantsRefillsAndReportsWhenReady) {
  const Clock::time_point t0{};
  EgressLimiter l(1'000'000, t0);  // 1 MB/s, burst 64 KiB
  EXPECT_EQ(l.burst(), 64u << 10);
  EXPECT_EQ(l.take(100'000, t0), 64u << 10);  // the full bucket, not more
  EXPECT_EQ(l.take(1, t0), 0u);
  EXPECT_EQ(l.ready_at(10'000, t0), t0 + 10ms);
  EXPECT_EQ(l.take(20'000, t0 + 10ms), 10'000u);
  l.give_back(4'000);
  EXPECT_EQ(l.take(20'000, t0 + 10ms), 4'000u);
  EXPECT_EQ(l.take(1 << 30, t0 + 10s), 64u << 10);  // refill caps at the burst
  EXPECT_EQ(l.ready_at(1 << 30, t0 + 10s), t0 + 10s + 65536us);  // at most a burst is awaited
}

TEST(EgressLimiter, BadValueNamesTheVariable) {
  ::setenv("TICTAC_RATE_LIMIT", "fast", 1);
  Result<EgressLimiter*> bad = EgressLimiter::process_wide();
  ::unsetenv("TICTAC_RATE_LIMIT");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_RATE_LIMIT"), std::string::npos);
  EXPECT_EQ(*EgressLimiter::process_wide(), nullptr);
}

// Sends `bytes` over loopback TCP between two Contexts and returns the seconds it took.
double transfer_seconds(std::size_t bytes) {
  auto a = Context::create({});
  auto b = Context::create({});
  EXPECT_TRUE(a.ok() && b.ok());
  std::string addr = *(*b)->listen("tcp://127.0.0.1:0");
  auto accepted = std::async(std::launch::async, [&] { return (*b)->accept(10s); });
  PeerId to = *(*a)->connect(addr);
  PeerId from = *accepted.get();
  std::vector<std::byte> src(bytes, std::byte{7}), dst(bytes);
  auto rs = MemoryRegion::host(src.data(), bytes);
  auto rd = MemoryRegion::host(dst.data(), bytes);
  std::promise<Status> sent, got;
  const auto start = Clock::now();
  (*b)->recv(from, 1, *rd, 0, bytes, [&](const Status& s, std::uint64_t, PeerId) { got.set_value(s); });
  (*a)->send(to, 1, *rs, 0, bytes, 0, [&](const Status& s, std::uint64_t, PeerId) { sent.set_value(s); });
  EXPECT_TRUE(got.get_future().get().ok());
  EXPECT_TRUE(sent.get_future().get().ok());
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(src, dst);
  return secs;
}

TEST(EgressLimiter, SlowsRealTcpTransfersToTheRate) {
  ::setenv("TICTAC_RATE_LIMIT", "8M", 1);  // 8 MiB/s
  const double secs = transfer_seconds(4 << 20);
  ::unsetenv("TICTAC_RATE_LIMIT");
  // 4 MiB at 8 MiB/s less one burst: at least ~0.48 s (a lower bound only: the machine may be slow).
  EXPECT_GE(secs, 0.45) << "the limit was not applied";
}

// While a throttled chunk is being written, the loop still takes new sends: a high-priority
// message posted during a long low-priority transfer overtakes it at a chunk boundary. (The
// endpoint used to write whatever tokens had trickled in, tens of bytes per sendmsg, without
// returning to the loop, so the new send reached the SendQueue only after the whole transfer;
// issue 16's late TF sends.)
TEST(EgressLimiter, LoopTakesNewSendsWhileThrottled) {
  ::setenv("TICTAC_RATE_LIMIT", "8M", 1);
  auto a = Context::create({});
  auto b = Context::create({});
  ASSERT_TRUE(a.ok() && b.ok());
  std::string addr = *(*b)->listen("tcp://127.0.0.1:0");
  auto accepted = std::async(std::launch::async, [&] { return (*b)->accept(10s); });
  PeerId to = *(*a)->connect(addr);
  PeerId from = *accepted.get();
  const std::size_t big = 4 << 20, small = 1024;
  std::vector<std::byte> src(big, std::byte{1}), dst(big), src2(small, std::byte{2}), dst2(small);
  auto rs = MemoryRegion::host(src.data(), big);
  auto rd = MemoryRegion::host(dst.data(), big);
  auto rs2 = MemoryRegion::host(src2.data(), small);
  auto rd2 = MemoryRegion::host(dst2.data(), small);
  std::promise<Clock::time_point> big_at, small_at;
  (*b)->recv(from, 1, *rd, 0, big, [&](const Status& s, std::uint64_t, PeerId) {
    EXPECT_TRUE(s.ok()) << s.to_string();
    big_at.set_value(Clock::now());
  });
  (*b)->recv(from, 2, *rd2, 0, small, [&](const Status& s, std::uint64_t, PeerId) {
    EXPECT_TRUE(s.ok()) << s.to_string();
    small_at.set_value(Clock::now());
  });
  std::this_thread::sleep_for(20ms);  // both receives advertised
  (*a)->send(to, 1, *rs, 0, big, 5, [](const Status&, std::uint64_t, PeerId) {});
  std::this_thread::sleep_for(30ms);  // the big message is being written, throttled
  (*a)->send(to, 2, *rs2, 0, small, 0, [](const Status&, std::uint64_t, PeerId) {});
  const Clock::time_point s_at = small_at.get_future().get(), b_at = big_at.get_future().get();
  ::unsetenv("TICTAC_RATE_LIMIT");
  // 4 MiB at 8 MiB/s: ~0.5 s; the small message waits for one 1 MiB chunk (~0.125 s) at most.
  EXPECT_LT(s_at, b_at) << "the small high-priority send reached the queue only after the big one";
  EXPECT_EQ(dst2, src2);
}

}  // namespace
}  // namespace tictac::transport::tcp
