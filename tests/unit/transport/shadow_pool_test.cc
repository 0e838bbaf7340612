// ShadowPool: staged-transfer host shadows are reused (the fix for 0.54 GB/s staged 64 MiB
// transfers on an H200 host, docs/cuda.md), bounded, and freed past the bound.
#include "transport/shadow_pool.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tictac::transport {
namespace {

TEST(ShadowPool, ReleasedShadowIsReusedForTheNextMessage) {
  ShadowPool pool(std::size_t{1} << 30);
  std::byte* first = nullptr;
  {
    Shadow s = pool.take(64 << 20);
    ASSERT_TRUE(s);
    EXPECT_GE(s.capacity(), std::size_t{64} << 20);
    first = s.data();
  }
  EXPECT_EQ(pool.cached_bytes(), std::size_t{64} << 20);
  Shadow again = pool.take(48 << 20);  // fits in the cached 64 MiB (at most twice the size)
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(pool.reused(), 1u);
  EXPECT_EQ(pool.allocated(), 1u);
  EXPECT_EQ(pool.cached_bytes(), 0u);
}

TEST(ShadowPool, FarLargerBuffersAreNotSpentOnSmallMessages) {
  ShadowPool pool(std::size_t{1} << 30);
  { Shadow big = pool.take(64 << 20); }
  Shadow small = pool.take(1 << 20);
  EXPECT_EQ(small.capacity(), std::size_t{1} << 20);
  EXPECT_EQ(pool.reused(), 0u);
  EXPECT_EQ(pool.cached_bytes(), std::size_t{64} << 20);
}

TEST(ShadowPool, CacheStaysWithinItsBoundDroppingTheLargestFirst) {
  ShadowPool pool(10 << 20);
  {
    Shadow a = pool.take(4 << 20);
    Shadow b = pool.take(4 << 20);
    Shadow c = pool.take(6 << 20);
  }
  EXPECT_LE(pool.cached_bytes(), std::size_t{10} << 20);
  EXPECT_EQ(pool.cached_bytes(), std::size_t{8} << 20);  // the 6 MiB one went
  { Shadow huge = pool.take(32 << 20); }                   // larger than the bound: freed
  EXPECT_EQ(pool.cached_bytes(), std::size_t{8} << 20);
}

TEST(ShadowPool, ZeroBoundMeansNoReuse) {
  ShadowPool pool(0);
  { Shadow s = pool.take(1 << 20); }
  Shadow t = pool.take(1 << 20);
  EXPECT_EQ(pool.reused(), 0u);
  EXPECT_EQ(pool.allocated(), 2u);
}

TEST(ShadowPool, MovedShadowReturnsOnce) {
  ShadowPool pool(std::size_t{1} << 30);
  {
    Shadow a = pool.take(1 << 20);
    Shadow b = std::move(a);
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): checking the moved-from state
    Shadow c;
    c = std::move(b);
  }
  EXPECT_EQ(pool.cached_bytes(), std::size_t{1} << 20);
}

TEST(ShadowPool, CacheSizeFromTheEnvironment) {
  ::setenv("TICTAC_CUDA_SHADOW_CACHE", "64M", 1);
  Result<std::size_t> v = ShadowPool::cache_bytes_from_env();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, std::size_t{64} << 20);
  ::setenv("TICTAC_CUDA_SHADOW_CACHE", "lots", 1);
  Result<std::size_t> bad = ShadowPool::cache_bytes_from_env();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_CUDA_SHADOW_CACHE"), std::string::npos);
  ::unsetenv("TICTAC_CUDA_SHADOW_CACHE");
  EXPECT_EQ(*ShadowPool::cache_bytes_from_env(), std::size_t{256} << 20);
}

}  // namespace
}  // namespace tictac::transport
