// Host staging against the scripted CUDA model: copies are ordered by events on the side
// stream, bytes arrive exactly, buffers cycle through the pool.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "cuda/staging_pool.h"
#include "tests/unit/cuda/fake_api.h"

namespace tictac::cuda {
namespace {

using testing::FakeApi;

class StagingPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<EventPool>> e = EventPool::create(api, 0, 6);
    ASSERT_TRUE(e.ok());
    events = std::move(*e);
    StagingOptions o;
    o.buffers = 2;
    o.buffer_bytes = 256;
    Result<std::unique_ptr<StagingPool>> p = StagingPool::create(api, *events, o);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    pool = std::move(*p);
    producer = *api.create_stream();
    device = static_cast<unsigned char*>(api.alloc_device(256));
  }
  std::vector<std::string> calls_since(std::size_t from) const {
    return {api.calls().begin() + static_cast<std::ptrdiff_t>(from), api.calls().end()};
  }

  FakeApi api;
  std::unique_ptr<EventPool> events;
  std::unique_ptr<StagingPool> pool;
  Stream producer = nullptr;
  unsigned char* device = nullptr;
};

TEST_F(StagingPoolTest, DeviceToHostWaitsForTheProducerThenCopiesExactly) {
  std::iota(device, device + 200, 1);
  api.enqueue_hold(producer);  // the producer kernel has not finished writing
  const std::size_t mark = api.calls().size();
  Result<std::uint64_t> id = pool->copy_to_host(device, 200, producer);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  EXPECT_EQ(calls_since(mark), (std::vector<std::string>{"use_device", "record_event", "stream_wait_event",
                                                          "memcpy_async", "record_event"}));
  EXPECT_EQ(api.queued(pool->side_stream()), 3u);  // wait, copy, record — in that order
  api.run();
  EXPECT_TRUE(pool->poll().empty());  // the copy must not start before the producer is done
  device[0] = 42;                     // the producer's last write
  api.release_hold(producer);
  api.run();
  std::vector<StagingDone> done = pool->poll();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].id, *id);
  EXPECT_EQ(done[0].kind, StagingDone::Kind::to_host);
  ASSERT_TRUE(done[0].status.ok());
  EXPECT_EQ(done[0].bytes, 200u);
  const auto* staged = static_cast<const unsigned char*>(done[0].buffer.host);
  EXPECT_EQ(staged[0], 42);
  EXPECT_EQ(std::memcmp(staged + 1, device + 1, 199), 0);
  EXPECT_EQ(pool->available(), 1u);  // lent to the caller until it has sent
  ASSERT_TRUE(pool->release(done[0].buffer).ok());
  EXPECT_EQ(pool->available(), 2u);
  EXPECT_EQ(pool->release(done[0].buffer).code(), StatusCode::invalid_argument);
  EXPECT_EQ(events->available(), events->capacity());
}

TEST_F(StagingPoolTest, HostToDeviceOrdersTheConsumerAfterTheCopy) {
  Stream consumer = *api.create_stream();
  Result<StagingBuffer> buf = pool->acquire();
  ASSERT_TRUE(buf.ok());
  auto* host = static_cast<unsigned char*>(buf->host);
  for (int i = 0; i < 256; ++i) host[i] = static_cast<unsigned char>(255 - i);  // the receive landed
  api.enqueue_hold(pool->side_stream());  // an earlier copy still running
  Result<std::uint64_t> id = pool->copy_to_device(*buf, 256, device, consumer);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  api.enqueue_marker(consumer, "kernel");
  api.run();
  EXPECT_TRUE(api.trace().empty());
  EXPECT_TRUE(pool->poll().empty());
  EXPECT_EQ(pool->available(), 1u);
  api.release_hold(pool->side_stream());
  api.run();
  EXPECT_EQ(api.trace(), std::vector<std::string>{"kernel"});
  EXPECT_EQ(std::memcmp(device, host, 256), 0);
  std::vector<StagingDone> done = pool->poll();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].kind, StagingDone::Kind::to_device);
  EXPECT_TRUE(done[0].status.ok());
  EXPECT_EQ(pool->available(), 2u);  // back in the pool by itself
  EXPECT_EQ(pool->release(*buf).code(), StatusCode::invalid_argument);
}

TEST_F(StagingPoolTest, CompletionsComeBackInSideStreamOrder) {
  std::iota(device, device + 256, 0);
  Result<std::uint64_t> a = pool->copy_to_host(device, 16, producer);
  Result<std::uint64_t> b = pool->copy_to_host(device + 16, 16, producer);
  ASSERT_TRUE(a.ok() && b.ok());
  api.run();
  std::vector<StagingDone> done = pool->poll();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].id, *a);
  EXPECT_EQ(done[1].id, *b);
  EXPECT_EQ(static_cast<const unsigned char*>(done[1].buffer.host)[0], 16);
}

TEST_F(StagingPoolTest, ExhaustionAndBadSizesAreReported) {
  ASSERT_TRUE(pool->acquire().ok());
  ASSERT_TRUE(pool->acquire().ok());
  Result<StagingBuffer> third = pool->acquire();
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), StatusCode::resource_exhausted);
  Result<std::uint64_t> out = pool->copy_to_host(device, 8, producer);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::resource_exhausted);
  EXPECT_NE(out.status().message().find("TICTAC_CUDA_STAGING_BUFFERS"), std::string::npos);

  EXPECT_EQ(pool->copy_to_host(device, 257, producer).status().code(), StatusCode::invalid_argument);
  EXPECT_NE(pool->copy_to_host(device, 257, producer).status().message().find("chunks"), std::string::npos);
  EXPECT_EQ(pool->copy_to_host(device, 0, producer).status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(pool->copy_to_host(nullptr, 8, producer).status().code(), StatusCode::invalid_argument);
  StagingBuffer forged{7, device, 256};
  EXPECT_EQ(pool->copy_to_device(forged, 8, device, producer).status().code(), StatusCode::invalid_argument);
}

TEST_F(StagingPoolTest, EmptyEventPoolIsBackPressureNotALeak) {
  std::vector<Event> held;
  while (events->available() > 1) held.push_back(*events->acquire());
  Result<std::uint64_t> out = pool->copy_to_host(device, 8, producer);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::resource_exhausted);
  EXPECT_EQ(pool->available(), 2u);
  for (Event e : held) events->release(e);
  EXPECT_TRUE(pool->copy_to_host(device, 8, producer).ok());
}

TEST_F(StagingPoolTest, FailedCopyReturnsBufferAndEvents) {
  api.fail_next("memcpy_async", Status(StatusCode::cuda_error, "cudaMemcpyAsync failed: scripted"));
  Result<std::uint64_t> out = pool->copy_to_host(device, 8, producer);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::cuda_error);
  EXPECT_EQ(pool->available(), 2u);
  EXPECT_EQ(events->available(), events->capacity());

  Result<StagingBuffer> buf = pool->acquire();
  ASSERT_TRUE(buf.ok());
  api.fail_next("memcpy_async", Status(StatusCode::cuda_error, "cudaMemcpyAsync failed: scripted"));
  EXPECT_EQ(pool->copy_to_device(*buf, 8, device, producer).status().code(), StatusCode::cuda_error);
  EXPECT_TRUE(pool->release(*buf).ok());  // still lent to the caller after the failure
}

TEST_F(StagingPoolTest, FailedCompletionRecordRetiresTheBuffer) {
  Result<StagingBuffer> buf = pool->acquire();
  ASSERT_TRUE(buf.ok());
  // copy_to_device: memcpy succeeds, then the completion record fails.
  api.fail_next("record_event", Status(StatusCode::cuda_error, "cudaEventRecord failed: scripted"));
  EXPECT_EQ(pool->copy_to_device(*buf, 8, device, producer).status().code(), StatusCode::cuda_error);
  EXPECT_EQ(pool->available(), 1u);  // the in-flight copy may still read it: never reused
  EXPECT_EQ(pool->release(*buf).code(), StatusCode::invalid_argument);
  EXPECT_EQ(events->available(), events->capacity());
}

TEST_F(StagingPoolTest, ConsumerWaitFailureStillRecyclesTheBufferAfterTheCopy) {
  Stream consumer = *api.create_stream();
  Result<StagingBuffer> buf = pool->acquire();
  ASSERT_TRUE(buf.ok());
  api.fail_next("stream_wait_event", Status(StatusCode::cuda_error, "cudaStreamWaitEvent failed: scripted"));
  EXPECT_EQ(pool->copy_to_device(*buf, 8, device, consumer).status().code(), StatusCode::cuda_error);
  api.run();
  EXPECT_TRUE(pool->poll().empty());  // already reported as a failure
  EXPECT_EQ(pool->available(), 2u);
}

TEST(StagingPoolCreate, ValidatesOptionsAndCleansUp) {
  FakeApi api;
  Result<std::unique_ptr<EventPool>> e = EventPool::create(api, 0, 2);
  ASSERT_TRUE(e.ok());
  StagingOptions zero;
  zero.buffers = 0;
  EXPECT_EQ(StagingPool::create(api, **e, zero).status().code(), StatusCode::invalid_argument);
  StagingOptions other_device;
  other_device.device = 1;
  EXPECT_EQ(StagingPool::create(api, **e, other_device).status().code(), StatusCode::invalid_argument);
  api.fail_next("create_stream", Status(StatusCode::cuda_error, "cudaStreamCreate failed: scripted"));
  StagingOptions small;
  small.buffer_bytes = 64;
  EXPECT_EQ(StagingPool::create(api, **e, small).status().code(), StatusCode::cuda_error);
  EXPECT_EQ(api.live_pinned(), 0u);
  {
    Result<std::unique_ptr<StagingPool>> ok = StagingPool::create(api, **e, small);
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(api.live_pinned(), 1u);
    EXPECT_EQ(api.live_streams(), 1u);
  }
  EXPECT_EQ(api.live_pinned(), 0u);
  EXPECT_EQ(api.live_streams(), 0u);
}

TEST(StagingOptions, FromEnvironment) {
  ::setenv("TICTAC_CUDA_STAGING_BUFFERS", "3", 1);
  ::setenv("TICTAC_CUDA_STAGING_BYTES", "1M", 1);
  Result<StagingOptions> o = StagingOptions::from_env(0);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->buffers, 3u);
  EXPECT_EQ(o->buffer_bytes, 1u << 20);
  ::setenv("TICTAC_CUDA_STAGING_BUFFERS", "-1", 1);
  EXPECT_EQ(StagingOptions::from_env(0).status().code(), StatusCode::invalid_argument);
  ::unsetenv("TICTAC_CUDA_STAGING_BUFFERS");
  ::setenv("TICTAC_CUDA_STAGING_BYTES", "huge", 1);
  Result<StagingOptions> bad = StagingOptions::from_env(0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_CUDA_STAGING_BYTES"), std::string::npos);
  ::unsetenv("TICTAC_CUDA_STAGING_BYTES");
}

}  // namespace
}  // namespace tictac::cuda
