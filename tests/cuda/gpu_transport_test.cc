// Device buffers through the transport on a real GPU (suite 'cuda'): two thread-mode Contexts
// over TCP on 127.0.0.1 (staged: TCP cannot touch GPU memory). Without a usable GPU it prints
// the probe's reason and exits 77 (meson: SKIP). Every wait is bounded (kLimit), so a stream
// that never gets released fails the test instead of hanging it.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda/runtime_api.h"
#include "transport/context.h"
#include "transport/tcp/factory.h"

namespace tictac::transport {
namespace {

using namespace std::chrono_literals;
constexpr auto kLimit = 20s;
cuda::Api* g_api = nullptr;

struct Done {
  std::mutex m;
  std::condition_variable cv;
  bool fired = false;
  Status status;
  std::uint64_t bytes = 0;
  Callback make() {
    return [this](const Status& s, std::uint64_t n, PeerId) {
      std::lock_guard<std::mutex> lock(m);
      fired = true;
      status = s;
      bytes = n;
      cv.notify_all();
    };
  }
  bool wait() {
    std::unique_lock<std::mutex> lock(m);
    return cv.wait_for(lock, kLimit, [&] { return fired; });
  }
};

// Polls the stream until its work is done (never cudaStreamSynchronize: a hung wait would hang).
bool drained(cudaStream_t s) {
  const auto end = std::chrono::steady_clock::now() + kLimit;
  while (std::chrono::steady_clock::now() < end) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) return false;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

class GpuTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    rx_ = make("gpu-receiver");
    tx_ = make("gpu-sender");
    ASSERT_TRUE(rx_ && tx_);
    Result<std::string> addr = rx_->listen("tcp://127.0.0.1:0");
    ASSERT_TRUE(addr.ok()) << addr.status().to_string();
    Result<PeerId> to = tx_->connect(*addr);
    Result<PeerId> from = rx_->accept(10s);
    ASSERT_TRUE(to.ok() && from.ok()) << to.status().to_string() << " / " << from.status().to_string();
    to_ = *to;
    from_ = *from;
    ASSERT_EQ(cudaStreamCreateWithFlags(&producer_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&consumer_, cudaStreamNonBlocking), cudaSuccess);
    Result<cuda::DeviceCaps> caps = g_api->device_caps(0);
    ASSERT_TRUE(caps.ok());
    stream_waits_ = caps->stream_mem_ops && !caps->lazy_module_loading;
  }
  void TearDown() override {
    if (tx_) tx_->join();
    if (rx_) rx_->join();
    tx_.reset();
    rx_.reset();
    if (producer_ != nullptr) cudaStreamDestroy(producer_);
    if (consumer_ != nullptr) cudaStreamDestroy(consumer_);
    for (void* p : device_) cudaFree(p);
    for (void* p : pinned_) cudaFreeHost(p);
  }
  std::unique_ptr<Context> make(const char* name) {
    ContextOptions o;
    o.name = name;
    o.auth_token = "";
    o.cuda_api = g_api;
    o.backends.push_back(tcp::create());
    Result<std::unique_ptr<Context>> c = Context::create(std::move(o));
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  void* device(std::size_t n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess);
    device_.push_back(p);
    return p;
  }
  unsigned char* pinned(std::size_t n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMallocHost(&p, n), cudaSuccess);
    pinned_.push_back(p);
    return static_cast<unsigned char*>(p);
  }
  MemoryRegion region(Context& ctx, void* p, std::size_t n, cudaStream_t s) {
    Result<MemoryRegion> r = ctx.register_buffer(BufferDesc{p, n, MemoryType::cuda, -1, s});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }

  std::unique_ptr<Context> rx_, tx_;
  PeerId to_ = 0, from_ = 0;
  cudaStream_t producer_ = nullptr, consumer_ = nullptr;
  bool stream_waits_ = false;
  std::vector<void*> device_, pinned_;
};

TEST_F(GpuTransport, StagedRoundTripIsExactAndOrdersTheConsumerStream) {
  constexpr std::size_t kBytes = (1u << 20) + 3108;
  unsigned char* pattern = pinned(kBytes);
  unsigned char* snapshot = pinned(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) pattern[i] = static_cast<unsigned char>(i * 29 + (i >> 10));
  std::memset(snapshot, 0, kBytes);
  void* src = device(kBytes);
  void* dst = device(kBytes);
  ASSERT_EQ(cudaMemset(dst, 0, kBytes), cudaSuccess);
  MemoryRegion out = region(*tx_, src, kBytes, producer_);
  MemoryRegion in = region(*rx_, dst, kBytes, consumer_);
  Done sent, received;
  rx_->recv(from_, 1, in, 0, kBytes, received.make());
  if (stream_waits_) {  // ordered after the arrival although enqueued before it
    ASSERT_EQ(cudaMemcpyAsync(snapshot, dst, kBytes, cudaMemcpyDeviceToHost, consumer_), cudaSuccess);
  }
  // The producer writes the tensor; the send is submitted before that copy has run.
  ASSERT_EQ(cudaMemcpyAsync(src, pattern, kBytes, cudaMemcpyHostToDevice, producer_), cudaSuccess);
  tx_->send(to_, 1, out, 0, kBytes, 0, sent.make());
  ASSERT_TRUE(sent.wait() && received.wait());
  ASSERT_TRUE(sent.status.ok()) << sent.status.to_string();
  ASSERT_TRUE(received.status.ok()) << received.status.to_string();
  EXPECT_EQ(received.bytes, kBytes);
  if (!stream_waits_) {  // event fallback: work enqueued after the callback is ordered
    ASSERT_EQ(cudaMemcpyAsync(snapshot, dst, kBytes, cudaMemcpyDeviceToHost, consumer_), cudaSuccess);
  }
  ASSERT_TRUE(drained(consumer_));
  EXPECT_EQ(std::memcmp(snapshot, pattern, kBytes), 0);
}

TEST_F(GpuTransport, ArrivalTimeoutReleasesTheConsumerStream) {
  // The pools of this test's contexts are made at the first registration, which reads the
  // tunable: a short arrival timeout.
  setenv("TICTAC_CUDA_ARRIVAL_TIMEOUT", "300ms", 1);
  constexpr std::size_t kBytes = 4096;
  void* dst = device(kBytes);
  MemoryRegion in = region(*rx_, dst, kBytes, consumer_);
  unsetenv("TICTAC_CUDA_ARRIVAL_TIMEOUT");
  unsigned char* snapshot = pinned(kBytes);
  Done received;
  rx_->recv(kAnyPeer, 2, in, 0, kBytes, received.make());
  ASSERT_EQ(cudaMemcpyAsync(snapshot, dst, kBytes, cudaMemcpyDeviceToHost, consumer_), cudaSuccess);
  ASSERT_TRUE(received.wait());
  EXPECT_EQ(received.status.code(), StatusCode::timeout) << received.status.to_string();
  EXPECT_TRUE(drained(consumer_)) << "the consumer stream still waits after the timeout";
}

TEST_F(GpuTransport, CancelReleasesTheConsumerStream) {
  constexpr std::size_t kBytes = 4096;
  void* dst = device(kBytes);
  MemoryRegion in = region(*rx_, dst, kBytes, consumer_);
  unsigned char* snapshot = pinned(kBytes);
  Done received;
  const RequestId id = rx_->recv(from_, 3, in, 0, kBytes, received.make());
  ASSERT_EQ(cudaMemcpyAsync(snapshot, dst, kBytes, cudaMemcpyDeviceToHost, consumer_), cudaSuccess);
  std::this_thread::sleep_for(50ms);
  if (stream_waits_) {
    EXPECT_EQ(cudaStreamQuery(consumer_), cudaErrorNotReady) << "the stream did not wait";
  }
  rx_->cancel(id);
  ASSERT_TRUE(received.wait());
  EXPECT_EQ(received.status.code(), StatusCode::cancelled) << received.status.to_string();
  EXPECT_TRUE(drained(consumer_));
}

}  // namespace
}  // namespace tictac::transport

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<tictac::cuda::Api> api = tictac::cuda::open_runtime_api();
  if (!api->viability().ok()) {
    std::printf("SKIP: %s\n", api->viability().message().c_str());
    return 77;
  }
  std::printf("%s\n", tictac::cuda::describe(*api).c_str());
  tictac::transport::g_api = api.get();
  const int rc = RUN_ALL_TESTS();
  tictac::transport::g_api = nullptr;
  return rc;
}
