// Device buffers through the transport core, against the scripted CUDA model: two manual-mode
// Contexts (sender and receiver) share one FakeApi, so every CUDA step is deterministic. Covers
// the staged path (loopback and tcp, which lack GPU memory support), the direct path (a loopback
// backend that claims it), the producer gate, the consumer-stream release after the last byte,
// the arrival timeout, cancel and dead peers, and the not-viable refusal.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cuda/flag_pool.h"
#include "tests/unit/cuda/fake_api.h"
#include "transport/context.h"
#include "transport/loopback/factory.h"
#include "transport/tcp/factory.h"

namespace tictac::transport {
namespace {

using cuda::testing::FakeApi;

// A loopback backend that claims GPU memory support (the direct path; the fake's device memory
// is host memory, so loopback's memcpy moves it).
class CudaCapableLoopback final : public Backend {
 public:
  explicit CudaCapableLoopback(std::shared_ptr<loopback::Fabric> f) : inner_(loopback::create(std::move(f))) {}
  std::string_view name() const override { return inner_->name(); }
  Viability viability() const override { return inner_->viability(); }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    c.cuda_memory = true;
    return c;
  }
  Status attach(ProgressEngine& e) override { return inner_->attach(e); }
  Result<std::string> listen(std::string_view a, AcceptFn fn) override { return inner_->listen(a, std::move(fn)); }
  void connect(std::string_view a, Clock::time_point d, ConnectFn fn) override { inner_->connect(a, d, std::move(fn)); }
  void shutdown() override { inner_->shutdown(); }

 private:
  std::unique_ptr<Backend> inner_;
};

enum class Kind { loopback, tcp, direct };

struct Done {
  bool fired = false;
  Status status;
  std::uint64_t bytes = 0;
};

Callback record(Done* d) {
  return [d](const Status& s, std::uint64_t n, PeerId) {
    EXPECT_FALSE(d->fired) << "callback fired twice";
    d->fired = true;
    d->status = s;
    d->bytes = n;
  };
}

class DeviceTransport : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    // Small staging buffers and chunks: several pieces per message, and back-pressure.
    setenv("TICTAC_CUDA_STAGING_BYTES", "4096", 1);
    setenv("TICTAC_CUDA_STAGING_BUFFERS", "2", 1);
    setenv("TICTAC_CUDA_EVENTS", "64", 1);
    setenv("TICTAC_CUDA_STREAM_FLAGS", "16", 1);
    if (std::getenv("TICTAC_CUDA_ARRIVAL_TIMEOUT") == nullptr) setenv("TICTAC_CUDA_ARRIVAL_TIMEOUT", "30s", 1);
  }
  void TearDown() override {
    sender_.reset();
    receiver_.reset();
    unsetenv("TICTAC_CUDA_ARRIVAL_TIMEOUT");
  }

  std::unique_ptr<Context> make(const std::string& name) {
    ContextOptions o;
    o.name = name;
    o.mode = ProgressEngine::Mode::manual;
    TransportConfig c;
    c.chunk_bytes = 4096;
    c.window_chunks = 2;
    c.eager_bytes = 8192;
    c.timeout = std::chrono::seconds(20);
    o.config = c;
    o.auth_token = "";
    o.cuda_api = &api_;
    if (GetParam() == Kind::tcp) {
      o.backends.push_back(tcp::create());
    } else if (GetParam() == Kind::direct) {
      o.backends.push_back(std::make_unique<CudaCapableLoopback>(fabric_));
    } else {
      o.backends.push_back(loopback::create(fabric_));
    }
    Result<std::unique_ptr<Context>> ctx = Context::create(std::move(o));
    EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
    return ctx.ok() ? std::move(ctx).value() : nullptr;
  }

  // Connects sender -> receiver; each manual context is driven by its own thread meanwhile
  // (no CUDA work happens during the handshake).
  void connect() {
    sender_ = make("sender");
    receiver_ = make("receiver");
    ASSERT_TRUE(sender_ && receiver_);
    Result<std::string> addr =
        receiver_->listen(GetParam() == Kind::tcp ? "tcp://127.0.0.1:0" : "loopback://dev-" + std::to_string(++seq_));
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

  MemoryRegion device_region(Context& ctx, void* p, std::size_t n, cuda::Stream s) {
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

  // One step of everything: both loops and the GPU model.
  void step() {
    sender_->progress();
    receiver_->progress();
    api_.run();
  }
  template <typename Pred>
  bool pump(Pred done, int max_steps = 20000) {
    for (int i = 0; i < max_steps; ++i) {
      if (done()) return true;
      step();
      if (GetParam() == Kind::tcp && i % 64 == 63) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return done();
  }
  bool consumer_ran() const {
    for (const std::string& t : api_.trace()) {
      if (t == "consumer") return true;
    }
    return false;
  }
  // Work the user enqueues on the consumer stream right after recv(): a snapshot of the buffer
  // and a marker kernel.
  void enqueue_consumer_work(const void* dst, std::vector<unsigned char>& snapshot) {
    ASSERT_TRUE(api_.memcpy_async(snapshot.data(), dst, snapshot.size(), consumer_).ok());
    api_.enqueue_marker(consumer_, "consumer");
  }
  std::uint32_t flag_error_word() const {
    return reinterpret_cast<const std::uint32_t*>(api_.last_wait_addr())[1];
  }

  FakeApi api_;
  std::shared_ptr<loopback::Fabric> fabric_ = loopback::create_fabric();
  std::unique_ptr<Context> sender_;
  std::unique_ptr<Context> receiver_;
  PeerId to_receiver_ = 0;
  PeerId from_sender_ = 0;
  cuda::Stream producer_ = nullptr;
  cuda::Stream consumer_ = nullptr;
  static inline int seq_ = 0;
};

TEST_P(DeviceTransport, RoundTripIsByteExactAndOrderedOnBothStreams) {
  connect();
  constexpr std::size_t kBytes = 3 * 4096 + 1234;  // several staging pieces and chunks
  auto* src = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 7 + 3);
  std::memset(dst, 0, kBytes);
  MemoryRegion out = device_region(*sender_, src, kBytes, producer_);
  MemoryRegion in = device_region(*receiver_, dst, kBytes, consumer_);

  Done sent, received;
  std::vector<unsigned char> snapshot(kBytes, 0);
  const std::size_t set_up_calls = api_.calls().size();
  receiver_->recv(kAnyPeer, 7, in, 0, kBytes, record(&received));
  receiver_->progress();
  enqueue_consumer_work(dst, snapshot);
  api_.enqueue_hold(producer_);  // the producer kernel is still writing the tensor
  sender_->send(to_receiver_, 7, out, 0, kBytes, 0, record(&sent));
  for (int i = 0; i < 300; ++i) step();
  EXPECT_FALSE(sent.fired);
  EXPECT_FALSE(received.fired) << received.status.to_string();
  EXPECT_FALSE(consumer_ran()) << "the consumer stream ran before the data arrived";
  EXPECT_EQ(std::count(dst, dst + kBytes, 0), static_cast<std::ptrdiff_t>(kBytes)) << "bytes moved before the producer finished";

  src[kBytes - 1] = 0xA5;  // the producer's last write, before its stream reaches the send
  api_.release_hold(producer_);
  ASSERT_TRUE(pump([&] { return sent.fired && received.fired && consumer_ran(); }));
  ASSERT_TRUE(sent.status.ok()) << sent.status.to_string();
  ASSERT_TRUE(received.status.ok()) << received.status.to_string();
  EXPECT_EQ(sent.bytes, kBytes);
  EXPECT_EQ(received.bytes, kBytes);
  EXPECT_EQ(std::memcmp(dst, src, kBytes), 0);
  // The consumer work enqueued right after recv() saw every byte: the stream was released only
  // after the last chunk was on the device.
  EXPECT_EQ(std::memcmp(snapshot.data(), src, kBytes), 0);
  EXPECT_EQ(flag_error_word(), 0u);
  // The loops made no set-up (possibly blocking) call: only enqueues, queries and host stores.
  for (std::size_t i = set_up_calls; i < api_.calls().size(); ++i) {
    const std::string& c = api_.calls()[i];
    EXPECT_TRUE(c == "use_device" || c == "record_event" || c == "event_fired" || c == "stream_wait_event" ||
                c == "memcpy_async" || c.rfind("wait_value32", 0) == 0)
        << "the progress loop called " << c;
  }
  const bool staged_copies = std::count(api_.calls().begin(), api_.calls().end(), "memcpy_async") > 1;
  EXPECT_EQ(staged_copies, GetParam() != Kind::direct);
}

TEST_P(DeviceTransport, ManyConcurrentMessagesShareTheStagingPool) {
  connect();
  constexpr int kMessages = 4;
  constexpr std::size_t kBytes = 2 * 4096 + 17;
  std::vector<unsigned char*> src, dst;
  std::vector<MemoryRegion> outs, ins;
  std::vector<Done> sent(kMessages), received(kMessages);
  for (int m = 0; m < kMessages; ++m) {
    src.push_back(static_cast<unsigned char*>(api_.alloc_device(kBytes)));
    dst.push_back(static_cast<unsigned char*>(api_.alloc_device(kBytes)));
    for (std::size_t i = 0; i < kBytes; ++i) src[m][i] = static_cast<unsigned char>(i + 31 * m);
    std::memset(dst[m], 0, kBytes);
    outs.push_back(device_region(*sender_, src[m], kBytes, producer_));
    ins.push_back(device_region(*receiver_, dst[m], kBytes, consumer_));
  }
  for (int m = 0; m < kMessages; ++m) {
    receiver_->recv(from_sender_, 100 + m, ins[m], 0, kBytes, record(&received[m]));
    sender_->send(to_receiver_, 100 + m, outs[m], 0, kBytes, m, record(&sent[m]));
  }
  ASSERT_TRUE(pump([&] {
    for (int m = 0; m < kMessages; ++m) {
      if (!sent[m].fired || !received[m].fired) return false;
    }
    return true;
  }));
  for (int m = 0; m < kMessages; ++m) {
    EXPECT_TRUE(sent[m].status.ok()) << sent[m].status.to_string();
    EXPECT_TRUE(received[m].status.ok()) << received[m].status.to_string();
    EXPECT_EQ(std::memcmp(dst[m], src[m], kBytes), 0) << "message " << m;
  }
}

TEST_P(DeviceTransport, DeviceSendToHostReceiveAndBack) {
  connect();
  constexpr std::size_t kBytes = 5000;
  auto* dev = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  std::vector<unsigned char> host(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) dev[i] = static_cast<unsigned char>(i ^ 0x5C);
  MemoryRegion out = device_region(*sender_, dev, kBytes, producer_);
  MemoryRegion in = std::move(receiver_->register_buffer(BufferDesc{host.data(), kBytes})).value();
  Done sent, received;
  receiver_->recv(from_sender_, 1, in, 0, kBytes, record(&received));
  sender_->send(to_receiver_, 1, out, 0, kBytes, 0, record(&sent));
  ASSERT_TRUE(pump([&] { return sent.fired && received.fired; }));
  ASSERT_TRUE(received.status.ok()) << received.status.to_string();
  EXPECT_EQ(std::memcmp(host.data(), dev, kBytes), 0);
}

TEST_P(DeviceTransport, UnexpectedMessageLandsOnTheDeviceWhenTheReceiveComes) {
  connect();
  constexpr std::size_t kBytes = 6000;  // eager (under 8 KiB): arrives before the receive
  auto* src = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 13);
  std::memset(dst, 0, kBytes);
  MemoryRegion out = device_region(*sender_, src, kBytes, producer_);
  MemoryRegion in = device_region(*receiver_, dst, kBytes, consumer_);
  Done sent, received;
  sender_->send(to_receiver_, 9, out, 0, kBytes, 0, record(&sent));
  ASSERT_TRUE(pump([&] { return sent.fired; }));
  for (int i = 0; i < 50; ++i) step();
  const auto copies_before = std::count(api_.calls().begin(), api_.calls().end(), "memcpy_async");
  receiver_->recv(from_sender_, 9, in, 0, kBytes, record(&received));
  ASSERT_TRUE(pump([&] { return received.fired; }));
  ASSERT_TRUE(received.status.ok()) << received.status.to_string();
  EXPECT_EQ(std::memcmp(dst, src, kBytes), 0);
  // Its eager bytes waited in a host pool: even the direct path copies them up on a stream
  // (the connection's memcpy must never write device memory).
  EXPECT_GT(std::count(api_.calls().begin(), api_.calls().end(), "memcpy_async"), copies_before);
}

TEST_P(DeviceTransport, EmptyAndShortMessagesComplete) {
  connect();
  auto* src = static_cast<unsigned char*>(api_.alloc_device(8192));
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(8192));
  for (int i = 0; i < 8192; ++i) src[i] = static_cast<unsigned char>(i * 3);
  std::memset(dst, 0xEE, 8192);
  MemoryRegion out = device_region(*sender_, src, 8192, producer_);
  MemoryRegion in = device_region(*receiver_, dst, 8192, consumer_);
  Done s0, r0, s1, r1;
  receiver_->recv(from_sender_, 1, in, 0, 0, record(&r0));
  sender_->send(to_receiver_, 1, out, 0, 0, 0, record(&s0));
  receiver_->recv(from_sender_, 2, in, 100, 8000, record(&r1));  // a 5000-byte message into 8000
  sender_->send(to_receiver_, 2, out, 10, 5000, 0, record(&s1));
  ASSERT_TRUE(pump([&] { return s0.fired && r0.fired && s1.fired && r1.fired; }));
  EXPECT_TRUE(r0.status.ok()) << r0.status.to_string();
  EXPECT_EQ(r0.bytes, 0u);
  ASSERT_TRUE(r1.status.ok()) << r1.status.to_string();
  EXPECT_EQ(r1.bytes, 5000u);
  EXPECT_EQ(std::memcmp(dst + 100, src + 10, 5000), 0);
  EXPECT_EQ(dst[99], 0xEE);
  EXPECT_EQ(dst[5100], 0xEE) << "bytes past the message were written";
}

TEST_P(DeviceTransport, MoreReceivesThanFlagsWaitForAFreeFlag) {
  connect();  // TICTAC_CUDA_STREAM_FLAGS=16
  constexpr int kMessages = 24;
  constexpr std::size_t kBytes = 300;
  std::vector<unsigned char*> src, dst;
  std::vector<MemoryRegion> outs, ins;
  std::vector<Done> sent(kMessages), received(kMessages);
  for (int m = 0; m < kMessages; ++m) {
    src.push_back(static_cast<unsigned char*>(api_.alloc_device(kBytes)));
    dst.push_back(static_cast<unsigned char*>(api_.alloc_device(kBytes)));
    std::memset(src[m], m + 1, kBytes);
    std::memset(dst[m], 0, kBytes);
    outs.push_back(device_region(*sender_, src[m], kBytes, producer_));
    ins.push_back(device_region(*receiver_, dst[m], kBytes, consumer_));
  }
  for (int m = 0; m < kMessages; ++m) receiver_->recv(from_sender_, 200 + m, ins[m], 0, kBytes, record(&received[m]));
  for (int i = 0; i < 20; ++i) step();
  for (int m = 0; m < kMessages; ++m) sender_->send(to_receiver_, 200 + m, outs[m], 0, kBytes, 0, record(&sent[m]));
  // Both sides: a send may complete after its receive (an inline frame's on_sent comes a loop
  // step later), and its callback must not outlive `sent` (it did, under MALLOC_PERTURB_).
  ASSERT_TRUE(pump([&] {
    for (int m = 0; m < kMessages; ++m) {
      if (!received[m].fired || !sent[m].fired) return false;
    }
    return true;
  }));
  for (int m = 0; m < kMessages; ++m) {
    ASSERT_TRUE(sent[m].status.ok()) << m << ": " << sent[m].status.to_string();
    ASSERT_TRUE(received[m].status.ok()) << m << ": " << received[m].status.to_string();
    EXPECT_EQ(dst[m][kBytes - 1], m + 1) << "message " << m;
  }
}

TEST_P(DeviceTransport, EventFallbackOrdersWorkEnqueuedAfterTheCallback) {
  api_.set_caps(cuda::DeviceCaps{/*stream_mem_ops=*/false, false, true, true});
  connect();
  constexpr std::size_t kBytes = 2 * 4096 + 5;
  auto* src = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  for (std::size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 11 + 1);
  std::memset(dst, 0, kBytes);
  MemoryRegion out = device_region(*sender_, src, kBytes, producer_);
  MemoryRegion in = device_region(*receiver_, dst, kBytes, consumer_);
  Done sent, received;
  receiver_->recv(from_sender_, 1, in, 0, kBytes, record(&received));
  sender_->send(to_receiver_, 1, out, 0, kBytes, 0, record(&sent));
  ASSERT_TRUE(pump([&] { return sent.fired && received.fired; }));
  ASSERT_TRUE(received.status.ok()) << received.status.to_string();
  EXPECT_EQ(std::count(api_.calls().begin(), api_.calls().end(), "wait_value32"), 0);
  std::vector<unsigned char> snapshot(kBytes, 0);
  enqueue_consumer_work(dst, snapshot);  // after the callback: ordered after the arrival
  api_.run();
  EXPECT_TRUE(consumer_ran());
  EXPECT_EQ(std::memcmp(snapshot.data(), src, kBytes), 0);
}

TEST_P(DeviceTransport, SendsToOnePeerAndTagAreMatchedInSubmissionOrder) {
  connect();
  constexpr std::size_t kBytes = 4096 + 100;
  auto* dev = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  std::memset(dev, 0xD1, kBytes);
  std::vector<unsigned char> host_a(kBytes, 0xA1), host_b(kBytes, 0xB2), host_c(kBytes, 0xC3);
  MemoryRegion d = device_region(*sender_, dev, kBytes, producer_);
  MemoryRegion ha = std::move(sender_->register_buffer(BufferDesc{host_a.data(), kBytes})).value();
  MemoryRegion hb = std::move(sender_->register_buffer(BufferDesc{host_b.data(), kBytes})).value();
  MemoryRegion hc = std::move(sender_->register_buffer(BufferDesc{host_c.data(), kBytes})).value();
  std::vector<std::vector<unsigned char>> got(3, std::vector<unsigned char>(kBytes, 0));
  std::vector<MemoryRegion> ins;
  for (auto& g : got) ins.push_back(std::move(receiver_->register_buffer(BufferDesc{g.data(), kBytes})).value());
  std::vector<Done> sent(4), received(3);
  api_.enqueue_hold(producer_);
  // Host A goes first; the device send waits for its producer; host B and C were sent after it,
  // and C is cancelled while it waits behind the device send.
  sender_->send(to_receiver_, 8, ha, 0, kBytes, 0, record(&sent[0]));
  sender_->send(to_receiver_, 8, d, 0, kBytes, 0, record(&sent[1]));
  sender_->send(to_receiver_, 8, hb, 0, kBytes, 0, record(&sent[2]));
  const RequestId c = sender_->send(to_receiver_, 8, hc, 0, kBytes, 0, record(&sent[3]));
  for (int i = 0; i < 3; ++i) receiver_->recv(from_sender_, 8, ins[i], 0, kBytes, record(&received[i]));
  for (int i = 0; i < 200; ++i) step();
  sender_->cancel(c);
  ASSERT_TRUE(pump([&] { return received[0].fired && sent[3].fired; }));
  EXPECT_EQ(sent[3].status.code(), StatusCode::cancelled) << sent[3].status.to_string();
  EXPECT_FALSE(received[1].fired) << "host B overtook the device send submitted before it";
  EXPECT_FALSE(sent[2].fired);
  api_.release_hold(producer_);
  // Every send completes too (its callback points at `sent`, which dies with this scope).
  ASSERT_TRUE(pump([&] {
    return received[1].fired && received[2].fired && sent[0].fired && sent[1].fired && sent[2].fired;
  }));
  EXPECT_TRUE(sent[1].status.ok()) << sent[1].status.to_string();
  EXPECT_TRUE(sent[2].status.ok()) << sent[2].status.to_string();
  EXPECT_EQ(got[0], host_a);
  EXPECT_EQ(got[1], std::vector<unsigned char>(kBytes, 0xD1));
  EXPECT_EQ(got[2], host_b);
}

TEST_P(DeviceTransport, ArrivalTimeoutReleasesTheStreamWithTheSentinelAndFailsTheEndpoint) {
  setenv("TICTAC_CUDA_ARRIVAL_TIMEOUT", "1s", 1);
  connect();
  constexpr std::size_t kBytes = 64 << 10;  // rendezvous: the receiver binds, then waits for DATA
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(kBytes));
  MemoryRegion in = device_region(*receiver_, dst, kBytes, consumer_);
  std::vector<unsigned char> host(kBytes, 1);
  MemoryRegion out = std::move(sender_->register_buffer(BufferDesc{host.data(), kBytes})).value();
  Done received, sent;
  std::vector<unsigned char> snapshot(kBytes, 0);
  // The send first: its ANNOUNCE leaves before the receive exists, so it waits for READY (a
  // receive posted first would be advertised and the data would follow the ANNOUNCE at once).
  sender_->send(to_receiver_, 3, out, 0, kBytes, 0, record(&sent));
  // Post the ANNOUNCE, then stop the sender: the peer went quiet after announcing the message.
  sender_->progress();  // the sender is never driven again
  receiver_->recv(from_sender_, 3, in, 0, kBytes, record(&received));
  receiver_->progress();
  enqueue_consumer_work(dst, snapshot);
  // The receiver reads it and binds (well within the 1 s arrival timeout, even on a busy host).
  for (int i = 0; i < 100; ++i) {
    receiver_->progress(std::chrono::milliseconds(2));
    api_.run();
  }
  EXPECT_FALSE(received.fired) << received.status.to_string();
  const auto start = std::chrono::steady_clock::now();
  while (!received.fired && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    receiver_->progress(std::chrono::milliseconds(5));
    api_.run();
  }
  ASSERT_TRUE(received.fired);
  EXPECT_EQ(received.status.code(), StatusCode::timeout) << received.status.to_string();
  EXPECT_NE(received.status.message().find("TICTAC_CUDA_ARRIVAL_TIMEOUT"), std::string::npos)
      << received.status.message();
  EXPECT_NE(received.status.message().find("error sentinel"), std::string::npos) << received.status.message();
  EXPECT_TRUE(consumer_ran()) << "the consumer stream still hangs";
  EXPECT_EQ(flag_error_word(), cuda::kFlagErrorSentinel);
  // The endpoint is marked failed: later requests on it get the same terminal status.
  Done later;
  receiver_->recv(from_sender_, 4, in, 0, kBytes, record(&later));
  ASSERT_TRUE(pump([&] { return later.fired; }, 100));
  EXPECT_EQ(later.status.code(), StatusCode::timeout) << later.status.to_string();
}

TEST_P(DeviceTransport, UnmatchedReceiveTimesOutWithoutHangingTheStream) {
  setenv("TICTAC_CUDA_ARRIVAL_TIMEOUT", "100ms", 1);
  connect();
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(4096));
  MemoryRegion in = device_region(*receiver_, dst, 4096, consumer_);
  Done received;
  std::vector<unsigned char> snapshot(4096, 0);
  // Before the receive is posted: its arrival timeout counts from there, so a start taken later
  // (ASan makes the calls below take 70 us) would see the timeout fire "early".
  const auto start = std::chrono::steady_clock::now();
  receiver_->recv(kAnyPeer, 5, in, 0, 4096, record(&received));
  receiver_->progress();
  enqueue_consumer_work(dst, snapshot);
  while (!received.fired && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) step();
  ASSERT_TRUE(received.fired);
  EXPECT_EQ(received.status.code(), StatusCode::timeout) << received.status.to_string();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  EXPECT_TRUE(consumer_ran());
  EXPECT_EQ(flag_error_word(), cuda::kFlagErrorSentinel);
}

TEST_P(DeviceTransport, CancelledReceiveReleasesTheStream) {
  connect();
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(4096));
  MemoryRegion in = device_region(*receiver_, dst, 4096, consumer_);
  Done received;
  std::vector<unsigned char> snapshot(4096, 0);
  const RequestId id = receiver_->recv(from_sender_, 5, in, 0, 4096, record(&received));
  receiver_->progress();
  enqueue_consumer_work(dst, snapshot);
  for (int i = 0; i < 20; ++i) step();
  EXPECT_FALSE(consumer_ran());
  receiver_->cancel(id);
  ASSERT_TRUE(pump([&] { return received.fired && consumer_ran(); }, 200));
  EXPECT_EQ(received.status.code(), StatusCode::cancelled) << received.status.to_string();
  EXPECT_EQ(flag_error_word(), cuda::kFlagErrorSentinel);
}

TEST_P(DeviceTransport, DeadPeerReleasesTheStream) {
  connect();
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(4096));
  MemoryRegion in = device_region(*receiver_, dst, 4096, consumer_);
  Done received;
  std::vector<unsigned char> snapshot(4096, 0);
  receiver_->recv(from_sender_, 5, in, 0, 4096, record(&received));
  receiver_->progress();
  enqueue_consumer_work(dst, snapshot);
  sender_->close();
  sender_->join();  // the sender's process is gone: its endpoint closes
  const auto start = std::chrono::steady_clock::now();
  while (!received.fired && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    receiver_->progress(std::chrono::milliseconds(1));
    api_.run();
  }
  ASSERT_TRUE(received.fired);
  EXPECT_FALSE(received.status.ok());
  EXPECT_NE(received.status.code(), StatusCode::timeout) << received.status.to_string();
  api_.run();
  EXPECT_TRUE(consumer_ran());
  EXPECT_EQ(flag_error_word(), cuda::kFlagErrorSentinel);
}

TEST_P(DeviceTransport, CancelledSendNeverLeavesAndItsPeerFailingCompletesGatedSends) {
  connect();
  auto* src = static_cast<unsigned char*>(api_.alloc_device(4096));
  MemoryRegion out = device_region(*sender_, src, 4096, producer_);
  api_.enqueue_hold(producer_);
  Done first, second;
  const RequestId id = sender_->send(to_receiver_, 5, out, 0, 4096, 0, record(&first));
  sender_->send(to_receiver_, 6, out, 0, 4096, 0, record(&second));
  for (int i = 0; i < 20; ++i) step();
  sender_->cancel(id);
  ASSERT_TRUE(pump([&] { return first.fired; }, 100));
  EXPECT_EQ(first.status.code(), StatusCode::cancelled) << first.status.to_string();
  EXPECT_FALSE(second.fired);
  receiver_->close();
  receiver_->join();
  const auto start = std::chrono::steady_clock::now();
  while (!second.fired && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) {
    sender_->progress(std::chrono::milliseconds(1));
    api_.run();
  }
  ASSERT_TRUE(second.fired) << "a send gated on a held producer must complete when its peer fails";
  EXPECT_FALSE(second.status.ok());
  api_.release_hold(producer_);
  api_.run();
  for (int i = 0; i < 20; ++i) sender_->progress();
}

TEST_P(DeviceTransport, CloseCompletesPendingDeviceRequests) {
  connect();
  auto* src = static_cast<unsigned char*>(api_.alloc_device(4096));
  auto* dst = static_cast<unsigned char*>(api_.alloc_device(4096));
  MemoryRegion out = device_region(*sender_, src, 4096, producer_);
  MemoryRegion in = device_region(*receiver_, dst, 4096, consumer_);
  api_.enqueue_hold(producer_);
  Done sent, received;
  sender_->send(to_receiver_, 5, out, 0, 4096, 0, record(&sent));
  receiver_->recv(kAnyPeer, 5, in, 0, 4096, record(&received));
  for (int i = 0; i < 20; ++i) step();
  sender_->close();
  receiver_->close();
  ASSERT_TRUE(pump([&] { return sent.fired && received.fired; }, 200));
  EXPECT_EQ(sent.status.code(), StatusCode::cancelled) << sent.status.to_string();
  EXPECT_EQ(received.status.code(), StatusCode::cancelled) << received.status.to_string();
  EXPECT_EQ(flag_error_word(), cuda::kFlagErrorSentinel);
  api_.release_hold(producer_);
  api_.run();
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceTransport, ::testing::Values(Kind::loopback, Kind::tcp, Kind::direct),
                         [](const ::testing::TestParamInfo<Kind>& i) {
                           return i.param == Kind::loopback ? "loopback_staged"
                                  : i.param == Kind::tcp    ? "tcp_staged"
                                                            : "loopback_direct";
                         });

// --- registration ---

std::unique_ptr<Context> plain_context(cuda::Api* api) {
  ContextOptions o;
  o.mode = ProgressEngine::Mode::manual;
  o.auth_token = "";
  o.cuda_api = api;
  o.backends.push_back(loopback::create(loopback::create_fabric()));
  return std::move(Context::create(std::move(o))).value();
}

TEST(DeviceRegistration, NotViableRefusesDeviceRegionsWithTheReason) {
  std::unique_ptr<cuda::Api> api = cuda::make_unavailable_api(cuda::not_viable("no driver: scripted"));
  std::unique_ptr<Context> ctx = plain_context(api.get());
  int x = 0;
  BufferDesc d{&x, sizeof x, MemoryType::cuda, 0, nullptr};
  Result<MemoryRegion> r = ctx->register_buffer(d);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::unavailable);
  EXPECT_EQ(r.status().message(), "CUDA not viable: no driver: scripted");
  // Host regions are unaffected.
  EXPECT_TRUE(ctx->register_buffer(BufferDesc{&x, sizeof x}).ok());
}

TEST(DeviceRegistration, ThisMachinesTableRefusesOrChecksTheMemory) {
  std::unique_ptr<Context> ctx = plain_context(nullptr);  // the Context opens the runtime itself
  std::vector<unsigned char> host(64);
  Result<MemoryRegion> r = ctx->register_buffer(BufferDesc{host.data(), host.size(), MemoryType::cuda, 0, nullptr});
  ASSERT_FALSE(r.ok());
  if (r.status().code() == StatusCode::unavailable) {
    // No GPU, no driver, or a build without the toolkit (-Dcuda=disabled).
    EXPECT_EQ(r.status().message().rfind("CUDA not viable: ", 0), 0u) << r.status().message();
  } else {
    EXPECT_EQ(r.status().code(), StatusCode::invalid_argument) << r.status().to_string();  // plain host memory
  }
}

TEST(DeviceRegistration, ChecksMemoryTypeAndDevice) {
  FakeApi api(2);
  std::unique_ptr<Context> ctx = plain_context(&api);
  std::vector<unsigned char> host(64);
  Result<MemoryRegion> r = ctx->register_buffer(BufferDesc{host.data(), host.size(), MemoryType::cuda, 0, nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(r.status().message().find("host"), std::string::npos) << r.status().message();
  void* on1 = api.alloc_device(256, 1);
  r = ctx->register_buffer(BufferDesc{on1, 256, MemoryType::cuda, 0, nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("device 1"), std::string::npos) << r.status().message();
  r = ctx->register_buffer(BufferDesc{on1, 256, MemoryType::cuda, -1, nullptr});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->desc().cuda_device, 1);
  r = ctx->register_buffer(BufferDesc{on1, 512, MemoryType::cuda, 1, nullptr});
  EXPECT_FALSE(r.ok()) << "a range past the allocation must be refused";
  // Without a table, MemoryRegion alone refuses CUDA memory and says where to go.
  Result<MemoryRegion> bare = MemoryRegion::register_buffer(BufferDesc{on1, 256, MemoryType::cuda, 1, nullptr});
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("Context::register_buffer"), std::string::npos);
}

}  // namespace
}  // namespace tictac::transport
