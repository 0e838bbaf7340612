// ScratchPool (integration/group/scratch_pool.h): reuse, smallest fit, the bounds on what is kept
// free, and leases held on several threads at once.
#include "integration/group/scratch_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace tictac::group {
namespace {

TEST(ScratchPool, AReturnedBufferIsReused) {
  ScratchPool pool;
  std::byte* first = nullptr;
  {
    auto lease = pool.acquire(1 << 20);
    ASSERT_NE(lease.data(), nullptr);
    EXPECT_GE(lease.bytes(), 1u << 20);
    std::memset(lease.data(), 7, lease.bytes());  // the whole buffer is usable
    first = lease.data();
  }
  EXPECT_EQ(pool.free_buffers(), 1u);
  auto again = pool.acquire(512 << 10);  // smaller: the same buffer fits
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(pool.allocations(), 1u);
  EXPECT_EQ(pool.free_buffers(), 0u);
}

TEST(ScratchPool, TakesTheSmallestBufferThatFitsAndAllocatesWhenNoneDoes) {
  ScratchPool pool;
  std::byte* small = nullptr;
  std::byte* large = nullptr;
  {
    auto a = pool.acquire(64 << 10);
    auto b = pool.acquire(4 << 20);
    small = a.data();
    large = b.data();
  }
  EXPECT_EQ(pool.acquire(32 << 10).data(), small);
  EXPECT_EQ(pool.acquire(1 << 20).data(), large);
  auto bigger = pool.acquire(8 << 20);  // nothing fits
  EXPECT_EQ(pool.allocations(), 3u);
  EXPECT_GE(bigger.bytes(), 8u << 20);
}

TEST(ScratchPool, KeepsAtMostTheBoundsFreeAndPrefersLargerBuffers) {
  ScratchPool pool;
  {
    std::vector<ScratchPool::Lease> leases;
    for (std::size_t i = 0; i < ScratchPool::kMaxFree + 2; ++i)
      leases.push_back(pool.acquire((i + 1) << 10));
  }
  EXPECT_EQ(pool.free_buffers(), ScratchPool::kMaxFree);
  // The largest ones were kept: a request for the largest size is served without allocating.
  const std::size_t before = pool.allocations();
  auto largest = pool.acquire((ScratchPool::kMaxFree + 2) << 10);
  EXPECT_EQ(pool.allocations(), before);
  // A buffer larger than the byte bound is never kept.
  {
    auto huge = pool.acquire(ScratchPool::kMaxFreeBytes + 1);
  }
  EXPECT_EQ(pool.free_buffers(), ScratchPool::kMaxFree - 1);
}

TEST(ScratchPool, LeasesOnSeveralThreadsGetDistinctBuffers) {
  ScratchPool pool;
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<std::byte*> seen(kThreads * 50);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto lease = pool.acquire(64 << 10);
        std::memset(lease.data(), t, lease.bytes());
        for (std::size_t k = 0; k < lease.bytes(); k += 4096)
          ASSERT_EQ(lease.data()[k], static_cast<std::byte>(t)) << "shared with another thread";
        seen[static_cast<std::size_t>(t * 50 + i)] = lease.data();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(pool.allocations(), static_cast<std::size_t>(kThreads));
  EXPECT_LE(std::set<std::byte*>(seen.begin(), seen.end()).size(), static_cast<std::size_t>(kThreads));
}

TEST(ScratchPool, AMovedLeaseReturnsItsBufferOnce) {
  ScratchPool pool;
  {
    auto a = pool.acquire(4096);
    ScratchPool::Lease b = std::move(a);
    ScratchPool::Lease c;
    c = std::move(b);
    EXPECT_NE(c.data(), nullptr);
  }
  EXPECT_EQ(pool.free_buffers(), 1u);
}

}  // namespace
}  // namespace tictac::group
