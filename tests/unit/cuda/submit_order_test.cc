// Device send/recv order their stream at the call (transport/cuda_path.h, enqueue_at_submit):
// two manual-mode Contexts share the scripted CUDA table, and no test calls progress() between
// send()/recv() and its checks, so whatever the loop would enqueue is absent there. Checks:
//   - recv() has enqueued the consumer stream's wait before it returns: work the user enqueues
//     right after it (no progress in between) runs only once every byte is on the device;
//   - send() has recorded the producer gate before it returns: the send waits for the producer
//     work enqueued before send() but not for work enqueued after it (a later hold on the
//     producer stream must not keep the bytes back).
// Without the submit-time enqueue both fail: the loop would enqueue the wait behind the consumer
// work and record the gate behind the later hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/cuda/fake_api.h"
#include "transport/context.h"
#include "transport/loopback/factory.h"

namespace tictac::transport {
namespace {

using cuda::testing::FakeApi;

// Loopback claiming GPU memory support: the direct (unstaged) path.
class DirectLoopback final : public Backend {
 public:
  explicit DirectLoopback(std::shared_ptr<loopback::Fabric> f)
      : inner_(loopback::create(std::move(f))) {}
  std::string_view name() const override { return inner_->name(); }
  Viability viability() const override { return inner_->viability(); }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    c.cuda_memory = true;
    return c;
  }
  Status attach(ProgressEngine& e) override { return inner_->attach(e); }
  Result<std::string> listen(std::string_view a, AcceptFn fn) override {
    return inner_->listen(a, std::move(fn));
  }
  void connect(std::string_view a, Clock::time_point d, ConnectFn fn) override {
    inner_->connect(a, d, std::move(fn));
  }
  void shutdown() override { inner_->shutdown(); }

 private:
  std::unique_ptr<Backend> inner_;
};

struct Done {
  bool fired = false;
  Status status;
};

Callback record(Done* d) {
  return [d](const Status& s, std::uint64_t, PeerId) {
    d->fired = true;
    d->status = s;
  };
}

// Param: true = direct path, false = staged (loopback has no GPU memory support).
class SubmitOrder : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    setenv("TICTAC_CUDA_STAGING_BYTES", "4096", 1);
    setenv("TICTAC_CUDA_STAGING_BUFFERS", "2", 1);
    sender_ = make("sender");
    receiver_ = make("receiver");
    ASSERT_TRUE(sender_ && receiver_);
    Result<std::string> addr = receiver_->listen("loopback://submit-order");
    ASSERT_TRUE(addr.ok()) << addr.status().to_string();
    std::optional<Result<PeerId>> p;
    std::thread t([&] { p.emplace(sender_->connect(*addr)); });
    Result<PeerId> q = receiver_->accept(std::chrono::seconds(10));
    t.join();
    ASSERT_TRUE(p->ok()) << p->status().to_string();
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    to_receiver_ = **p;
    from_sender_ = *q;
    producer_ = *api_.create_stream();
    consumer_ = *api_.create_stream();
  }
  void TearDown() override {
    sender_.reset();
    receiver_.reset();
    unsetenv("TICTAC_CUDA_STAGING_BYTES");
    unsetenv("TICTAC_CUDA_STAGING_BUFFERS");
  }

  std::unique_ptr<Context> make(const std::string& name) {
    ContextOptions o;
    o.name = name;
    o.mode = ProgressEngine::Mode::manual;
    TransportConfig c;
    c.chunk_bytes = 4096;
    c.eager_bytes = 8192;
    o.config = c;
    o.auth_token = "";
    o.cuda_api = &api_;
    if (GetParam()) {
      o.backends.push_back(std::make_unique<DirectLoopback>(fabric_));
    } else {
      o.backends.push_back(loopback::create(fabric_));
    }
    Result<std::unique_ptr<Context>> ctx = Context::create(std::move(o));
    EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
    return ctx.ok() ? std::move(ctx).value() : nullptr;
  }

  MemoryRegion region(Context& ctx, void* p, std::size_t n, cuda::Stream s) {
    BufferDesc d;
    d.data = p;
    d.bytes = n;
    d.type = MemoryType::cuda;
    d.cuda_device = 0;
    d.cuda_stream = s;
    Result<MemoryRegion> r = ctx.register_buffer(d);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }

  template <typename Pred>
  bool pump(Pred done) {
    for (int i = 0; i < 20000; ++i) {
      if (done()) return true;
      sender_->progress(std::chrono::milliseconds(0));
      receiver_->progress(std::chrono::milliseconds(0));
      api_.run();
    }
    return done();
  }
  bool traced(const std::string& name) const {
    return std::find(api_.trace().begin(), api_.trace().end(), name) != api_.trace().end();
  }

  FakeApi api_;
  std::shared_ptr<loopback::Fabric> fabric_ = loopback::create_fabric();
  std::unique_ptr<Context> sender_;
  std::unique_ptr<Context> receiver_;
  PeerId to_receiver_ = 0;
  PeerId from_sender_ = 0;
  cuda::Stream producer_ = nullptr;
  cuda::Stream consumer_ = nullptr;
};

TEST_P(SubmitOrder, RecvOrdersTheConsumerStreamBeforeItReturns) {
  constexpr std::size_t kBytes = 3 * 4096 + 77;
  auto* src = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 3 + 1);
  std::memset(dst, 0, kBytes);
  MemoryRegion out = region(*sender_, src, kBytes, producer_);
  MemoryRegion in = region(*receiver_, dst, kBytes, consumer_);
  Done sent, received;
  receiver_->recv(from_sender_, 5, in, 0, kBytes, record(&received));
  EXPECT_EQ(api_.queued(consumer_), 1u)
      << "recv() returned before the consumer stream's wait was enqueued";
  std::vector<unsigned char> snapshot(kBytes,
                                      0);  // the consumer's next kernel, no progress before it
  ASSERT_TRUE(api_.memcpy_async(snapshot.data(), dst, kBytes, consumer_).ok());
  api_.enqueue_marker(consumer_, "consumer");
  api_.run();
  EXPECT_FALSE(traced("consumer")) << "the consumer kernel ran before any byte arrived";
  sender_->send(to_receiver_, 5, out, 0, kBytes, 0, record(&sent));
  ASSERT_TRUE(pump([&] { return sent.fired && received.fired && traced("consumer"); }));
  ASSERT_TRUE(received.status.ok()) << received.status.to_string();
  EXPECT_EQ(std::memcmp(dst, src, kBytes), 0);
  EXPECT_EQ(std::memcmp(snapshot.data(), src, kBytes), 0)
      << "the consumer kernel saw missing bytes";
}

TEST_P(SubmitOrder, SendWaitsForEarlierProducerWorkOnlyNotForLaterWork) {
  constexpr std::size_t kBytes = 2 * 4096 + 300;
  auto* src = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  std::vector<unsigned char> got(kBytes, 0);
  std::memset(src, 0x11, kBytes);
  MemoryRegion out = region(*sender_, src, kBytes, producer_);
  MemoryRegion in = std::move(receiver_->register_buffer(BufferDesc{got.data(), kBytes})).value();
  Done sent, received;
  receiver_->recv(from_sender_, 6, in, 0, kBytes, record(&received));
  api_.enqueue_hold(producer_);  // the kernel writing the tensor, enqueued before send()
  sender_->send(to_receiver_, 6, out, 0, kBytes, 0, record(&sent));
  EXPECT_EQ(api_.queued(producer_), 2u) << "send() returned before the producer gate was recorded";
  api_.enqueue_hold(producer_);  // a later kernel on the producer stream (e.g. the next layer)
  for (int i = 0; i < 100; ++i) {
    sender_->progress(std::chrono::milliseconds(0));
    receiver_->progress(std::chrono::milliseconds(0));
    api_.run();
  }
  EXPECT_FALSE(received.fired) << "bytes left before the producer's earlier work ran";
  std::memset(src, 0x5A, kBytes);  // the producer's write, done when its kernel completes
  api_.release_hold(producer_);    // releases the first hold only; the later one keeps blocking
  ASSERT_TRUE(pump([&] { return sent.fired && received.fired; }))
      << "the send waited for producer work enqueued after send()";
  EXPECT_TRUE(sent.status.ok()) << sent.status.to_string();
  EXPECT_EQ(got, std::vector<unsigned char>(kBytes, 0x5A));
  api_.release_hold(producer_);
  api_.run();
}

INSTANTIATE_TEST_SUITE_P(Paths, SubmitOrder, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "direct" : "staged"; });

}  // namespace
}  // namespace tictac::transport
