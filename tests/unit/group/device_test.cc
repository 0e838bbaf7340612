// Device buffers through a Group (Group::register_device / send_region / recv_region): two
// thread-mode ranks over real TCP (no GPU memory support, so the staged cuda_path) against the
// scripted CUDA model, made thread-safe by a locking wrapper and run by a pump thread. Checks the
// producer gate (no byte leaves before the producer stream's earlier work ran), byte equality,
// and that work enqueued on the consumer stream after recv_region() only runs once the bytes are
// on the device; the gate and the stream wait are on their streams when send_region() /
// recv_region() return, also inside a batch (no loop round trip). And on this machine's real CUDA table: a clear "CUDA not viable" error.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "cuda/runtime_api.h"
#include "integration/group/group.h"
#include "tests/unit/cuda/fake_api.h"
#include "transport/bootstrap/in_memory_store.h"

namespace tictac::group {
namespace {

using namespace std::chrono_literals;
using cuda::testing::FakeApi;

// FakeApi is single-threaded; the group's loop thread and the test's pump share it here.
class LockedApi final : public cuda::Api {
 public:
  explicit LockedApi(FakeApi& inner) : inner_(inner) {}
  std::mutex& mutex() { return mu_; }
  const Status& viability() const override { return inner_.viability(); }
  int device_count() const override { return inner_.device_count(); }
#define TICTAC_LOCKED(ret, name, params, args) \
  ret name params override {                   \
    std::lock_guard<std::mutex> lock(mu_);     \
    return inner_.name args;                   \
  }
  TICTAC_LOCKED(Result<cuda::DeviceCaps>, device_caps, (int d), (d))
  TICTAC_LOCKED(Status, use_device, (int d), (d))
  TICTAC_LOCKED(Result<cuda::PointerInfo>, pointer_info, (const void* p), (p))
  TICTAC_LOCKED(Result<cuda::HostMapping>, alloc_pinned, (std::size_t b, bool m), (b, m))
  TICTAC_LOCKED(Status, free_pinned, (void* h), (h))
  TICTAC_LOCKED(Result<cuda::Stream>, create_stream, (), ())
  TICTAC_LOCKED(Status, destroy_stream, (cuda::Stream s), (s))
  TICTAC_LOCKED(Status, wait_value32, (cuda::Stream s, cuda::DevicePtr a, std::uint32_t v, bool f),
                (s, a, v, f))
  TICTAC_LOCKED(Status, memcpy_async, (void* d, const void* s, std::size_t b, cuda::Stream st),
                (d, s, b, st))
  TICTAC_LOCKED(Result<cuda::Event>, create_event, (), ())
  TICTAC_LOCKED(Status, destroy_event, (cuda::Event e), (e))
  TICTAC_LOCKED(Status, record_event, (cuda::Event e, cuda::Stream s), (e, s))
  TICTAC_LOCKED(Result<bool>, event_fired, (cuda::Event e), (e))
  TICTAC_LOCKED(Status, stream_wait_event, (cuda::Stream s, cuda::Event e), (s, e))
  TICTAC_LOCKED(Result<int>, dmabuf_fd, (cuda::DevicePtr p, std::size_t b), (p, b))
#undef TICTAC_LOCKED

 private:
  FakeApi& inner_;
  std::mutex mu_;
};

GroupOptions options(int rank, cuda::Api* api) {
  GroupOptions o;
  o.rank = rank;
  o.size = 2;
  o.timeout = 10s;
  o.listen_address = "tcp://127.0.0.1:0";
  o.key_prefix = "device/";
  o.backends = "tcp";
  o.cuda_api = api;
  return o;
}

// Param: the transfers are posted inside a batch (the fence then runs at end_batch()).
class GroupDevice : public ::testing::TestWithParam<bool> {};

TEST_P(GroupDevice, StagedSendWaitsForTheProducerAndReleasesTheConsumerAfterTheLastByte) {
  const bool batched = GetParam();
  ::setenv("TICTAC_CUDA_STAGING_BYTES", "4096", 1);
  ::setenv("TICTAC_CUDA_STAGING_BUFFERS", "2", 1);
  FakeApi fake;
  LockedApi api(fake);
  bootstrap::InMemoryStore store;
  auto f0 = std::async(std::launch::async, [&] { return Group::create(store, options(0, &api)); });
  auto f1 = std::async(std::launch::async, [&] { return Group::create(store, options(1, &api)); });
  auto g0 = f0.get();
  auto g1 = f1.get();
  ASSERT_TRUE(g0.ok()) << g0.status().to_string();
  ASSERT_TRUE(g1.ok()) << g1.status().to_string();

  constexpr std::size_t kBytes = 5 * 4096 + 321;  // several staging pieces
  unsigned char* src;
  unsigned char* dst;
  cuda::Stream producer;
  cuda::Stream consumer;
  std::vector<unsigned char> snapshot(kBytes, 0);
  {
    std::lock_guard<std::mutex> lock(api.mutex());
    src = static_cast<unsigned char*>(fake.alloc_device(kBytes));
    dst = static_cast<unsigned char*>(fake.alloc_device(kBytes));
    producer = *fake.create_stream();
    consumer = *fake.create_stream();
  }
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 5 + 1);
  std::memset(dst, 0, kBytes);
  auto out = (*g0)->register_device(src, kBytes, 0, producer);
  auto in = (*g1)->register_device(dst, kBytes, 0, consumer);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_TRUE(in.ok()) << in.status().to_string();

  std::promise<Status> sent, received;
  if (batched) (*g1)->begin_batch();
  (*g1)->recv_region(0, 42, *in,
                     [&](const Status& s, std::uint64_t, int) { received.set_value(s); });
  {
    // Ordered at the call, also inside a batch (whose tasks reach the loop only at end_batch).
    std::lock_guard<std::mutex> lock(api.mutex());
    EXPECT_EQ(fake.queued(consumer), 1u) << "recv_region() returned before the stream wait was enqueued";
  }
  if (batched) (*g1)->end_batch();
  {
    std::lock_guard<std::mutex> lock(api.mutex());  // the consumer's next kernel
    ASSERT_TRUE(fake.memcpy_async(snapshot.data(), dst, kBytes, consumer).ok());
    fake.enqueue_marker(consumer, "consumer");
    fake.enqueue_hold(producer);  // the producer kernel is still writing the tensor
  }
  if (batched) (*g0)->begin_batch();
  (*g0)->send_region(1, 42, *out, 0,
                     [&](const Status& s, std::uint64_t, int) { sent.set_value(s); });
  {
    std::lock_guard<std::mutex> lock(api.mutex());
    EXPECT_EQ(fake.queued(producer), 2u) << "send_region() returned before the producer gate was recorded";
  }
  if (batched) (*g0)->end_batch();

  std::atomic<bool> stop{false};
  std::thread pump([&] {
    while (!stop) {
      {
        std::lock_guard<std::mutex> lock(api.mutex());
        fake.run();
      }
      std::this_thread::sleep_for(200us);
    }
  });
  auto sent_f = sent.get_future();
  auto received_f = received.get_future();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(sent_f.wait_for(0s), std::future_status::timeout) << "sent before the producer ran";
  EXPECT_EQ(std::count(dst, dst + kBytes, 0), static_cast<std::ptrdiff_t>(kBytes))
      << "bytes reached the receiver before the producer stream's earlier work ran";
  {
    std::lock_guard<std::mutex> lock(api.mutex());
    for (const std::string& t : fake.trace()) EXPECT_NE(t, "consumer") << "consumer ran early";
    src[kBytes - 1] = 0xC3;  // the producer's last write
    fake.release_hold(producer);
  }
  ASSERT_EQ(sent_f.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(received_f.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(sent_f.get().ok());
  EXPECT_TRUE(received_f.get().ok());
  bool consumer_ran = false;
  for (int i = 0; i < 2000 && !consumer_ran; ++i) {
    {
      std::lock_guard<std::mutex> lock(api.mutex());
      for (const std::string& t : fake.trace()) consumer_ran |= t == "consumer";
    }
    std::this_thread::sleep_for(1ms);
  }
  stop = true;
  pump.join();
  EXPECT_TRUE(consumer_ran);
  EXPECT_EQ(std::memcmp(dst, src, kBytes), 0);
  // The consumer's work enqueued right after recv_region() saw every byte (incl. the last write).
  EXPECT_EQ(std::memcmp(snapshot.data(), src, kBytes), 0);
  (*g0)->close();
  (*g1)->close();
  ::unsetenv("TICTAC_CUDA_STAGING_BYTES");
  ::unsetenv("TICTAC_CUDA_STAGING_BUFFERS");
}

INSTANTIATE_TEST_SUITE_P(Posting, GroupDevice, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "batched" : "single"; });

TEST(GroupDeviceReal, WithoutAUsableGpuRegistrationFailsNamingTheCause) {
  std::unique_ptr<cuda::Api> real = cuda::open_runtime_api();
  if (real->viability().ok()) GTEST_SKIP() << "CUDA is viable here: " << cuda::describe(*real);
  bootstrap::InMemoryStore store;
  GroupOptions o = options(0, nullptr);
  o.size = 1;
  auto g = Group::create(store, o);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  int fake_device_memory = 0;
  auto region = (*g)->register_device(&fake_device_memory, sizeof(int), 0, nullptr);
  ASSERT_FALSE(region.ok());
  EXPECT_EQ(region.status().code(), StatusCode::unavailable) << region.status().to_string();
  EXPECT_NE(region.status().message().find("CUDA not viable"), std::string::npos)
      << region.status().to_string();
}

}  // namespace
}  // namespace tictac::group
