// Real-GPU tests of the cuda/ layer (suite 'cuda'). Without a usable GPU the binary prints the
// probe's reason and exits 77 (meson: SKIP). Every wait on the device is bounded (kLimit) so a
// broken protocol fails the test instead of hanging it; a stream left waiting is released with
// fail_all() before the objects are destroyed.
//
// "Consumer" work is a kernel from test_kernels.cu when nvcc built it (TICTAC_TEST_KERNELS),
// otherwise a device-to-device copy on the consumer stream, which obeys the same stream order.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "cuda/device_buffer.h"
#include "cuda/event_pool.h"
#include "cuda/gpudirect.h"
#include "cuda/runtime_api.h"
#include "cuda/send_gate.h"
#include "cuda/staging_pool.h"
#include "cuda/stream_completion.h"
#ifdef TICTAC_TEST_KERNELS
#include "tests/cuda/test_kernels.h"
#endif

namespace tictac::cuda {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
constexpr auto kLimit = 10s;

Api* g_api = nullptr;

#define CUDA_OK(expr)                                                                       \
  do {                                                                                      \
    const cudaError_t err_ = (expr);                                                        \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorName(err_) << " " << cudaGetErrorString(err_); \
  } while (0)

// Polls until the stream drained; false on error or after kLimit.
bool drained(Stream s) {
  const auto end = Clock::now() + kLimit;
  while (Clock::now() < end) {
    const cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(s));
    if (err == cudaSuccess) return true;
    if (err != cudaErrorNotReady) {
      ADD_FAILURE() << "cudaStreamQuery: " << cudaGetErrorName(err);
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  ADD_FAILURE() << "stream did not drain within " << kLimit.count() << " s";
  return false;
}

// The stream is still blocked (after giving it time to run anything runnable).
bool still_blocked(Stream s) {
  std::this_thread::sleep_for(50ms);
  return cudaStreamQuery(static_cast<cudaStream_t>(s)) == cudaErrorNotReady;
}

// Consumer work: copy n words from src to dst on `s`.
void consume(const void* src, void* dst, std::size_t n, Stream s) {
#ifdef TICTAC_TEST_KERNELS
  ASSERT_EQ(tictac_test_copy_words(src, dst, n, s), 0);
#else
  CUDA_OK(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDefault, static_cast<cudaStream_t>(s)));
#endif
}

void read_word_on(const void* word, void* out, Stream s) {
#ifdef TICTAC_TEST_KERNELS
  ASSERT_EQ(tictac_test_read_word(word, out, s), 0);
#else
  CUDA_OK(cudaMemcpyAsync(out, word, 4, cudaMemcpyDefault, static_cast<cudaStream_t>(s)));
#endif
}

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(g_api, nullptr);
    ASSERT_TRUE(g_api->use_device(0).ok());
    Result<std::unique_ptr<EventPool>> e = EventPool::create(*g_api, 0, 64);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    events = std::move(*e);
    consumer = *g_api->create_stream();
    side = *g_api->create_stream();
  }
  void TearDown() override {
    if (sc) sc->fail_all(Status(StatusCode::cancelled, "test ended"));
    (void)cudaDeviceSynchronize();
    sc.reset();
    for (void* p : device_allocs) (void)cudaFree(p);
    (void)g_api->destroy_stream(consumer);
    (void)g_api->destroy_stream(side);
  }
  void make_completion(StreamCompletionOptions o) {
    Result<std::unique_ptr<StreamCompletion>> s = StreamCompletion::create(*g_api, *events, o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    sc = std::move(*s);
  }
  void* device_alloc(std::size_t bytes) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    EXPECT_EQ(cudaMemset(p, 0, bytes), cudaSuccess);
    device_allocs.push_back(p);
    return p;
  }
  std::vector<std::uint32_t> download(const void* dev, std::size_t words) {
    std::vector<std::uint32_t> out(words);
    EXPECT_EQ(cudaMemcpy(out.data(), dev, words * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  // An arrival written by "the network": a copy on its own stream, not ordered with `consumer`.
  void arrive(void* dst, const std::vector<std::uint32_t>& data) {
    CUDA_OK(cudaMemcpyAsync(dst, data.data(), data.size() * 4, cudaMemcpyHostToDevice,
                            static_cast<cudaStream_t>(side)));
    ASSERT_TRUE(drained(side));
  }
  // Stream waits in effect: the device has them and lazy module loading is off (meson runs this
  // binary with CUDA_MODULE_LOADING=EAGER; under LAZY the completion picks the event fallback).
  bool mem_ops() {
    Result<DeviceCaps> caps = g_api->device_caps(0);
    return caps.ok() && caps->stream_mem_ops && !caps->lazy_module_loading;
  }
  bool lazy_loading() {
    Result<DeviceCaps> caps = g_api->device_caps(0);
    return caps.ok() && caps->lazy_module_loading;
  }

  std::unique_ptr<EventPool> events;
  std::unique_ptr<StreamCompletion> sc;
  Stream consumer = nullptr;
  Stream side = nullptr;
  std::vector<void*> device_allocs;
};

std::vector<std::uint32_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint32_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = seed * 2654435761u + static_cast<std::uint32_t>(i);
  return v;
}

TEST_F(Gpu, ConsumerKernelStartsOnlyAfterTheHostStoresTheFlag) {
  if (!mem_ops()) GTEST_SKIP() << "stream memory operations unsupported on device 0";
  make_completion(StreamCompletionOptions{});
  ASSERT_EQ(sc->mode(), ArrivalMode::stream_wait);
  constexpr std::size_t n = 1 << 16;
  void* dst = device_alloc(n * 4);
  void* out = device_alloc(n * 4);
  Result<ArrivalTicket> t = sc->wait_on_stream(consumer, Clock::now());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  consume(dst, out, n, consumer);
  EXPECT_TRUE(still_blocked(consumer));
  const std::vector<std::uint32_t> data = pattern(n, 1);
  arrive(dst, data);
  EXPECT_TRUE(still_blocked(consumer)) << "the consumer ran before the flag was stored";
  EXPECT_EQ(download(out, n), std::vector<std::uint32_t>(n, 0u));
  ASSERT_TRUE(sc->complete(*t).ok());
  ASSERT_TRUE(drained(consumer));
  EXPECT_EQ(download(out, n), data);
}

TEST_F(Gpu, RealFlagWrapsAround) {
  if (!mem_ops()) GTEST_SKIP() << "stream memory operations unsupported on device 0";
  StreamCompletionOptions o;
  o.max_outstanding = 1;
  o.initial_sequence = 0xFFFFFFFEu;
  make_completion(o);
  constexpr std::size_t n = 256;
  void* dst = device_alloc(n * 4);
  void* out = device_alloc(n * 4);
  for (std::uint32_t round = 0; round < 4; ++round) {
    Result<ArrivalTicket> t = sc->wait_on_stream(consumer, Clock::now());
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->sequence, 0xFFFFFFFFu + round);
    consume(dst, out, n, consumer);
    EXPECT_TRUE(still_blocked(consumer)) << "round " << round << ": wait for " << t->sequence << " passed early";
    const std::vector<std::uint32_t> data = pattern(n, round + 10);
    arrive(dst, data);
    ASSERT_TRUE(sc->complete(*t).ok());
    ASSERT_TRUE(drained(consumer));
    EXPECT_EQ(download(out, n), data);
  }
}

TEST_F(Gpu, TimeoutReleasesTheStreamAndTheKernelSeesTheSentinel) {
  if (!mem_ops()) GTEST_SKIP() << "stream memory operations unsupported on device 0";
  StreamCompletionOptions o;
  o.timeout = 100ms;
  make_completion(o);
  void* out = device_alloc(4);
  const Clock::time_point start = Clock::now();
  Result<ArrivalTicket> t = sc->wait_on_stream(consumer, start);
  ASSERT_TRUE(t.ok());
  read_word_on(reinterpret_cast<const void*>(sc->flags()->device_error_address(t->flag)), out, consumer);
  EXPECT_TRUE(still_blocked(consumer));
  std::vector<ArrivalFailure> failed = sc->poll(start + 200ms);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].status.code(), StatusCode::timeout);
  ASSERT_TRUE(drained(consumer));
  EXPECT_EQ(download(out, 1)[0], kFlagErrorSentinel);
}

TEST_F(Gpu, EventFallbackOrdersWorkEnqueuedAfterCompletion) {
  StreamCompletionOptions o;
  o.allow_stream_mem_ops = false;
  o.side_stream = side;
  make_completion(o);
  ASSERT_EQ(sc->mode(), ArrivalMode::event_after_completion);
  constexpr std::size_t n = 4096;
  void* dst = device_alloc(n * 4);
  void* out = device_alloc(n * 4);
  Result<ArrivalTicket> t = sc->wait_on_stream(consumer, Clock::now());
  ASSERT_TRUE(t.ok());
  const std::vector<std::uint32_t> data = pattern(n, 3);
  arrive(dst, data);
  ASSERT_TRUE(sc->complete(*t).ok());
  consume(dst, out, n, consumer);
  ASSERT_TRUE(drained(consumer));
  EXPECT_EQ(download(out, n), data);
}

// Under lazy module loading a kernel's first launch while a stream waits on a stream memory
// operation blocks in the driver (holding the context lock) until the wait ends: on an H200 it
// deadlocked the copy that was to end it. The default completion must then use the event
// fallback, so a fresh kernel launched while an arrival is pending returns at once.
// Run by meson as cuda_gpu_lazy (CUDA_MODULE_LOADING=LAZY, this test and the fallback's).
TEST_F(Gpu, LazyModuleLoadingUsesTheEventFallbackAndLaunchesDoNotBlock) {
  if (!lazy_loading()) GTEST_SKIP() << "lazy module loading is off (CUDA_MODULE_LOADING=EAGER)";
  make_completion(StreamCompletionOptions{});
  ASSERT_EQ(sc->mode(), ArrivalMode::event_after_completion);
  constexpr std::size_t n = 4096;
  void* dst = device_alloc(n * 4);
  void* out = device_alloc(n * 4);
  void* scratch = device_alloc(n * 4);
  Result<ArrivalTicket> t = sc->wait_on_stream(consumer, Clock::now());
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->stream_waits);
  // The process's first launch of the consumer kernel (this test runs alone in cuda_gpu_lazy),
  // on another stream while the arrival is pending.
  const Clock::time_point before = Clock::now();
  consume(dst, scratch, n, side);
  EXPECT_LT(Clock::now() - before, kLimit);
  ASSERT_TRUE(drained(side));
  const std::vector<std::uint32_t> data = pattern(n, 5);
  arrive(dst, data);
  ASSERT_TRUE(sc->complete(*t).ok());
  consume(dst, out, n, consumer);
  ASSERT_TRUE(drained(consumer));
  EXPECT_EQ(download(out, n), data);
}

TEST_F(Gpu, TransferIsGatedOnTheProducerEvent) {
  if (!mem_ops()) GTEST_SKIP() << "the test blocks the producer with a stream wait";
  make_completion(StreamCompletionOptions{});
  SendGate gate(*events);
  Stream producer = consumer;
  constexpr std::size_t n = 1024;
  void* src = device_alloc(n * 4);
  // Block the producer until the host says so, then let it "compute" the tensor.
  Result<ArrivalTicket> hold = sc->wait_on_stream(producer, Clock::now());
  ASSERT_TRUE(hold.ok());
  const std::vector<std::uint32_t> data = pattern(n, 7);
  CUDA_OK(cudaMemcpyAsync(src, data.data(), n * 4, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(producer)));
  Result<std::uint64_t> id = gate.after_producer(producer);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(gate.poll().empty()) << "released while the producer was blocked";
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(sc->complete(*hold).ok());
  std::vector<GateRelease> released;
  const auto end = Clock::now() + kLimit;
  while (released.empty() && Clock::now() < end) {
    released = gate.poll();
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(released.size(), 1u);
  EXPECT_EQ(released[0].id, *id);
  EXPECT_TRUE(released[0].status.ok());
  // "Post the transfer": the bytes are final now, without synchronising the producer.
  std::vector<std::uint32_t> sent(n);
  CUDA_OK(cudaMemcpy(sent.data(), src, n * 4, cudaMemcpyDeviceToHost));
  EXPECT_EQ(sent, data);
}

TEST_F(Gpu, StagingRoundTripIsByteExact) {
  StagingOptions so;
  so.buffers = 4;
  so.buffer_bytes = 256 << 10;
  Result<std::unique_ptr<StagingPool>> p = StagingPool::create(*g_api, *events, so);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  StagingPool& pool = **p;
  const std::size_t bytes = (1 << 20) + 4 * 777;  // not a multiple of the buffer size
  const std::vector<std::uint32_t> data = pattern(bytes / 4, 5);
  void* src = device_alloc(bytes);
  void* dst = device_alloc(bytes);
  CUDA_OK(cudaMemcpy(src, data.data(), bytes, cudaMemcpyHostToDevice));

  // Device -> host through the pool, over a "wire" (host memory), then host -> device, chunk by
  // chunk, as a transport without GPU memory support would.
  std::vector<char> wire(bytes);
  std::size_t sent = 0, landed = 0, pending_in = 0;
  const auto end = Clock::now() + kLimit;
  while ((landed < bytes || pending_in > 0) && Clock::now() < end) {
    if (sent < bytes) {
      const std::size_t n = std::min(so.buffer_bytes, bytes - sent);
      Result<std::uint64_t> id = pool.copy_to_host(static_cast<char*>(src) + sent, n, consumer);
      if (id.ok()) {
        sent += n;
      } else {
        ASSERT_EQ(id.status().code(), StatusCode::resource_exhausted) << id.status().to_string();
      }
    }
    for (const StagingDone& d : pool.poll()) {
      ASSERT_TRUE(d.status.ok()) << d.status.to_string();
      if (d.kind == StagingDone::Kind::to_device) {
        --pending_in;
        continue;
      }
      std::memcpy(wire.data() + landed, d.buffer.host, d.bytes);  // "send"
      ASSERT_TRUE(pool.release(d.buffer).ok());
      Result<StagingBuffer> in = pool.acquire();  // "receive" into a staging buffer
      ASSERT_TRUE(in.ok()) << in.status().to_string();
      std::memcpy(in->host, wire.data() + landed, d.bytes);
      Result<std::uint64_t> id = pool.copy_to_device(*in, d.bytes, static_cast<char*>(dst) + landed, consumer);
      ASSERT_TRUE(id.ok()) << id.status().to_string();
      landed += d.bytes;
      ++pending_in;
    }
  }
  ASSERT_EQ(landed, bytes);
  ASSERT_TRUE(drained(consumer));
  EXPECT_EQ(download(dst, bytes / 4), data);
  EXPECT_EQ(pool.available(), so.buffers);
}

TEST_F(Gpu, PointerTypesAreDetected) {
  void* dev = device_alloc(1 << 20);
  void* pinned = nullptr;
  CUDA_OK(cudaHostAlloc(&pinned, 4096, cudaHostAllocDefault));
  void* managed = nullptr;
  CUDA_OK(cudaMallocManaged(&managed, 4096));
  std::vector<char> plain(4096);
  auto type_of = [](void* p, std::size_t n) {
    Result<DeviceBuffer> b = describe_buffer(*g_api, p, n);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    return b.ok() ? b->type : MemoryType::host;
  };
  EXPECT_EQ(type_of(dev, 1 << 20), MemoryType::device);
  EXPECT_EQ(type_of(static_cast<char*>(dev) + 4096, 4096), MemoryType::device);
  EXPECT_EQ(type_of(pinned, 4096), MemoryType::pinned_host);
  EXPECT_EQ(type_of(managed, 4096), MemoryType::managed);
  EXPECT_EQ(type_of(plain.data(), plain.size()), MemoryType::host);
  Result<DeviceBuffer> d = describe_buffer(*g_api, dev, 1 << 20, consumer);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->device, 0);
  // The allocation's extent as the driver reports it (it may round the request up).
  Result<PointerInfo> info = g_api->pointer_info(dev);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->range_start, reinterpret_cast<std::uint64_t>(dev));
  EXPECT_GE(info->range_size, std::uint64_t{1} << 20);
  EXPECT_EQ(describe_buffer(*g_api, static_cast<char*>(dev) + 4096, info->range_size).status().code(),
            StatusCode::invalid_argument);
  (void)cudaFreeHost(pinned);
  (void)cudaFree(managed);
}

TEST_F(Gpu, GpuDirectDetectionAndDmaBufExport) {
  const GpuDirectSupport gd = detect_gpudirect(*g_api, 0);
  std::printf("GPUDirect: dma-buf %s, nvidia-peermem %s%s%s\n", gd.dma_buf ? "yes" : "no",
              gd.peer_memory ? "yes" : "no", gd.reason.empty() ? "" : "; ", gd.reason.c_str());
  EXPECT_EQ(gd.available(), gd.reason.empty());
  if (!gd.dma_buf) GTEST_SKIP() << "dma-buf export unsupported on device 0";
  void* dev = device_alloc(4 << 20);
  Result<DmaBuf> buf = export_dmabuf(*g_api, reinterpret_cast<DevicePtr>(dev) + 100, 1 << 20);
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  EXPECT_GE(buf->fd(), 0);
  EXPECT_EQ(buf->offset(), 100u);
}

}  // namespace
}  // namespace tictac::cuda

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<tictac::cuda::Api> api = tictac::cuda::open_runtime_api();
  if (!api->viability().ok()) {
    std::printf("SKIP: %s\n", api->viability().message().c_str());
    return 77;
  }
  std::printf("%s\n%s\n", tictac::cuda::describe(*api).c_str(), tictac::cuda::build_description().c_str());
  tictac::cuda::g_api = api.get();
  const int rc = RUN_ALL_TESTS();
  tictac::cuda::g_api = nullptr;
  return rc;
}
