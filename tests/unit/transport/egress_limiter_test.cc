// TICTAC_RATE_LIMIT: the token bucket with explicit times, and a real TCP transfer it slows.
#include "transport/tcp/egress_limiter.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
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

}  // namespace
}  // namespace tictac::transport::tcp
