// Verbs backend, every error path on the fake fabric: remote access error, RNR retry exceeded,
// transport retry exceeded (dropped link), a fatal QP event, flushed work, a port going down,
// protocol violations by the peer. Each must reach the sink as exactly one on_failed whose Status
// names the peer (its QP, or the peer's name at the Context level) and the verbs status, with
// nothing left pending: no on_sent for lost frames, no sink call afterwards, no verbs object
// left in the fabric once everything is closed.
#include <gtest/gtest.h>

#include "tests/conformance/harness.h"
#include "tests/unit/verbs/backend_harness.h"

namespace tictac::verbs::testing {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string hex(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

VerbsConfig small_ring() {
  VerbsConfig c;
  c.slot_bytes = 4096;
  c.ring_slots = 4;
  c.signal_every = 2;
  return c;
}

// Exactly one failure, nothing after it, no frame reported sent.
void expect_single_failure(BackendPair& p, Side& side) {
  p.run_a_little();
  EXPECT_EQ(side.sink.failures.size(), 1u);
  EXPECT_EQ(side.sink.calls_after_failure, 0);
  EXPECT_TRUE(side.sink.sent.empty()) << "a frame that never arrived was reported sent";
  ASSERT_NE(side.verbs(), nullptr);
  EXPECT_TRUE(side.verbs()->closed());
  EXPECT_EQ(side.verbs()->frames_pending(), 0u);
  EXPECT_FALSE(side.endpoint->has_capacity());
}

class BackendErrors : public ::testing::Test {
 protected:
  void TearDown() override {
    pair_.reset();
    rogue_.reset();
    EXPECT_EQ(fabric_.live_objects(), 0u) << "verbs objects left behind";
  }

  // A connects to a rogue peer that breaks things as `o` says.
  BackendPair& connect_to_rogue(RogueOptions o, VerbsConfig a_config = small_ring()) {
    pair_ = std::make_unique<BackendPair>(fabric_.api(), a_config, small_ring());
    rogue_ = std::make_unique<RoguePeer>(fabric_.api(), o);
    const Status st = pair_->connect_a_to(rogue_->listen());
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(rogue_->join()) << rogue_->error();
    return *pair_;
  }

  BackendPair& connect_pair(VerbsConfig a = small_ring(), VerbsConfig b = small_ring()) {
    pair_ = std::make_unique<BackendPair>(fabric_.api(), a, b);
    EXPECT_TRUE(pair_->connect());
    return *pair_;
  }

  // Posts `n` frames of `size` bytes from side A (whatever capacity allows).
  void post_frames(int n, std::uint32_t size) {
    for (int i = 0; i < n && pair_->a.endpoint->has_capacity(); ++i) {
      payloads_.push_back(bytes_for(size, i));
      ASSERT_TRUE(pair_->a.endpoint->post(data_header(size, i + 1), payloads_.back().data(), i + 1).ok());
    }
  }

  fake::FakeFabric fabric_{threaded_fabric()};
  std::unique_ptr<BackendPair> pair_;
  std::unique_ptr<RoguePeer> rogue_;
  std::vector<std::vector<std::byte>> payloads_;
};

TEST_F(BackendErrors, RemoteAccessErrorNamesThePeerQp) {
  RogueOptions o;
  o.advertise_bad_rkey = true;
  BackendPair& p = connect_to_rogue(o);
  post_frames(1, 100);
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::protocol_error) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "remote access error")) << s.message();
  EXPECT_TRUE(contains(s.message(), "peer QP " + hex(rogue_->data_qp_num()))) << s.message();
  expect_single_failure(p, p.a);
}

TEST_F(BackendErrors, RnrRetryExceededWhenThePeerPostsNoReceives) {
  RogueOptions o;
  o.post_data_receives = false;
  VerbsConfig c = small_ring();
  c.rnr_retry = 2;  // not 7 (forever): the guard must trip
  BackendPair& p = connect_to_rogue(o, c);
  post_frames(3, 5000);
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::connection_lost) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "RNR retry counter exceeded")) << s.message();
  EXPECT_TRUE(contains(s.message(), "peer QP " + hex(rogue_->data_qp_num()))) << s.message();
  expect_single_failure(p, p.a);
}

TEST_F(BackendErrors, TransportRetryExceededOnADroppedLink) {
  VerbsConfig c = small_ring();
  c.retry_cnt = 1;
  BackendPair& p = connect_pair(c, c);
  const std::uint32_t peer_qp = p.b.verbs()->data_qp_num();
  ASSERT_TRUE(fabric_.drop_connection(p.a.verbs()->data_qp_num()).ok());
  post_frames(3, 9000);
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::connection_lost) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "transport retry counter exceeded")) << s.message();
  EXPECT_TRUE(contains(s.message(), "peer QP " + hex(peer_qp))) << s.message();
  expect_single_failure(p, p.a);
  // B learns it through the side channel (A tore its endpoint down).
  ASSERT_TRUE(p.run_until([&] { return !p.b.sink.failures.empty(); }));
  EXPECT_EQ(p.b.sink.failures[0].code(), StatusCode::connection_lost);
  EXPECT_TRUE(p.b.sink.frames.empty()) << "nothing crossed the dropped link";
}

TEST_F(BackendErrors, QpFatalEventFailsTheEndpointAndFlushesItsWork) {
  BackendPair& p = connect_pair();
  const std::uint32_t qp = p.a.verbs()->data_qp_num();
  // Hold A's writes in its send queue, so that they are outstanding when the QP dies.
  ASSERT_TRUE(fabric_.delay(qp, 1000000).ok());
  post_frames(3, 3000);
  p.run_a_little();  // the chain is posted
  ASSERT_TRUE(p.a.sink.failures.empty());
  ASSERT_TRUE(fabric_.qp_fatal(qp).ok());
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  // The async event is the cause, whether its fd or the flushed completions were seen first.
  EXPECT_EQ(s.code(), StatusCode::connection_lost) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "local work queue catastrophic error")) << s.message();
  EXPECT_TRUE(contains(s.message(), "QP " + hex(qp))) << s.message();
  expect_single_failure(p, p.a);
  EXPECT_TRUE(p.b.sink.frames.empty());
}

TEST_F(BackendErrors, FlushedWorkWithoutAnEventStillFailsOnce) {
  BackendPair& p = connect_pair();
  const std::uint32_t qp = p.a.verbs()->data_qp_num();
  // The first write comes back flushed (as if the QP had gone to the error state behind our
  // back, with no event) and the writes posted with it are flushed after it.
  ASSERT_TRUE(fabric_.fail_next(qp, IBV_WC_WR_FLUSH_ERR).ok());
  post_frames(3, 3000);
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::connection_lost) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "Work Request Flushed Error")) << s.message();
  EXPECT_TRUE(contains(s.message(), "error state")) << s.message();
  expect_single_failure(p, p.a);
}

TEST_F(BackendErrors, FirstErrorWinsOverTheFlushOfOutstandingWrites) {
  BackendPair& p = connect_pair();
  const std::uint32_t qp = p.a.verbs()->data_qp_num();
  // Four slots' worth, posted as one chain: the first write fails, three are flushed behind it.
  ASSERT_TRUE(fabric_.fail_next(qp, IBV_WC_RETRY_EXC_ERR).ok());
  post_frames(4, 4096);
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::connection_lost) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "transport retry counter exceeded")) << s.message();
  EXPECT_FALSE(contains(s.message(), "Flushed")) << s.message();
  expect_single_failure(p, p.a);
}

TEST_F(BackendErrors, PortDownFailsEveryEndpointAndRefusesNewOnesUntilItIsBack) {
  BackendPair& p = connect_pair();
  ASSERT_TRUE(fabric_.set_port_state("fake0", 1, IBV_PORT_DOWN).ok());
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty() && !p.b.sink.failures.empty(); }));
  for (Side* side : {&p.a, &p.b}) {
    const Status& s = side->sink.failures[0];
    EXPECT_EQ(s.code(), StatusCode::connection_lost) << s.to_string();
    EXPECT_TRUE(contains(s.message(), "port error")) << s.message();
    EXPECT_TRUE(contains(s.message(), "fake0:1")) << s.message();
    expect_single_failure(p, *side);
  }
  // New connections are refused while the port is down...
  Result<std::string> addr = p.b.backend->listen("127.0.0.1:0", [](std::unique_ptr<transport::Endpoint>) {});
  ASSERT_TRUE(addr.ok());
  Status got = Status(StatusCode::internal, "not called");
  bool done = false;
  auto connect = [&] {
    done = false;
    p.a.backend->connect(addr->substr(8), transport::Clock::now() + std::chrono::seconds(10),
                         [&](Result<std::unique_ptr<transport::Endpoint>> ep) {
                           got = ep.status();
                           done = true;
                         });
  };
  connect();
  ASSERT_TRUE(p.run_until([&] { return done; }));
  EXPECT_EQ(got.code(), StatusCode::connection_lost) << got.to_string();
  EXPECT_TRUE(contains(got.message(), "went down")) << got.message();
  // ... and accepted again once it is back.
  ASSERT_TRUE(fabric_.set_port_state("fake0", 1, IBV_PORT_ACTIVE).ok());
  p.run_a_little();
  connect();
  ASSERT_TRUE(p.run_until([&] { return done; }));
  EXPECT_TRUE(got.ok()) << got.to_string();
}

TEST_F(BackendErrors, GarbageHeaderFromThePeerIsAProtocolError) {
  BackendPair& p = connect_to_rogue(RogueOptions{});
  std::vector<std::byte> junk = bytes_for(kSlotHeaderRoom + 10, 5);
  EXPECT_EQ(rogue_->write_fragment(junk, 0, 0), IBV_WC_SUCCESS);
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::protocol_error) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "bad magic")) << s.message();
  expect_single_failure(p, p.a);
}

TEST_F(BackendErrors, FragmentOutOfSequenceIsAProtocolError) {
  BackendPair& p = connect_to_rogue(RogueOptions{});
  const auto header = transport::wire::encode(data_header(10, 1));
  std::vector<std::byte> frame(kSlotHeaderRoom + 10);
  std::memcpy(frame.data(), header.data(), header.size());
  EXPECT_EQ(rogue_->write_fragment(frame, 0, 5), IBV_WC_SUCCESS);
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::protocol_error) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "fragment 5 arrived where fragment 0 was due")) << s.message();
  expect_single_failure(p, p.a);
}

TEST_F(BackendErrors, AWellFormedFrameFromTheRogueIsDeliveredAndCredited) {
  // The control case for the two tests above: the same path with valid bytes works.
  BackendPair& p = connect_to_rogue(RogueOptions{});
  const std::vector<std::byte> payload = bytes_for(10, 9);
  const auto header = transport::wire::encode(data_header(10, 1));
  std::vector<std::byte> frame(kSlotHeaderRoom + 10);
  std::memcpy(frame.data(), header.data(), header.size());
  std::memcpy(frame.data() + kSlotHeaderRoom, payload.data(), payload.size());
  EXPECT_EQ(rogue_->write_fragment(frame, 0, 0), IBV_WC_SUCCESS);
  ASSERT_TRUE(p.run_until([&] { return p.a.sink.frames.size() == 1; }));
  EXPECT_EQ(p.a.sink.frames[0].payload, payload);
  EXPECT_TRUE(p.a.sink.failures.empty());
}

TEST_F(BackendErrors, RefusedHeaderClosesBothSides) {
  BackendPair& p = connect_pair();
  p.b.sink.refuse_headers = Status(StatusCode::protocol_error, "peer 'x': DATA for unknown message 1");
  post_frames(1, 10);
  ASSERT_TRUE(p.run_until([&] { return !p.b.sink.failures.empty() && !p.a.sink.failures.empty(); }));
  EXPECT_EQ(p.b.sink.failures[0], p.b.sink.refuse_headers);
  EXPECT_EQ(p.a.sink.failures[0].code(), StatusCode::connection_lost);
  EXPECT_EQ(p.b.sink.calls_after_failure, 0);
}

// Through whole Contexts: pending requests fail with the peer's name and the verbs cause.
TEST_F(BackendErrors, ContextRequestsNameThePeerAndTheVerbsCause) {
  using transport::testing::Buffer;
  using transport::testing::Recorder;
  auto make = [&](const char* name) {
    transport::ContextOptions o;
    o.name = name;
    o.config = transport::testing::small_config();
    o.backends.push_back(create(fabric_.api(), VerbsConfig{}));
    return transport::Context::create(std::move(o));
  };
  auto alice = make("alice");
  auto bob = make("bob");
  ASSERT_TRUE(alice.ok() && bob.ok());
  transport::PeerId ab = 0, ba = 0;
  ASSERT_TRUE(transport::testing::connect_pair(**alice, **bob, "verbs://127.0.0.1:0", &ab, &ba));
  Buffer src(1 << 20, 1, true), dst(1 << 20);
  Recorder rec;
  (*alice)->recv(ab, 1, dst.region, 0, dst.bytes.size(), rec.make("alice-recv"));
  (*bob)->recv(ba, 2, dst.region, 0, dst.bytes.size(), rec.make("bob-recv"));
  ASSERT_TRUE((*bob)->peer_name(ba).ok());
  ASSERT_TRUE(fabric_.set_port_state("fake0", 1, IBV_PORT_DOWN).ok());
  ASSERT_TRUE(rec.wait(2));
  const transport::testing::Completion a = rec.find("alice-recv");
  EXPECT_EQ(a.status.code(), StatusCode::connection_lost) << a.status.to_string();
  EXPECT_TRUE(contains(a.status.message(), "'bob'")) << a.status.message();
  EXPECT_TRUE(contains(a.status.message(), "port error")) << a.status.message();
  const transport::testing::Completion b = rec.find("bob-recv");
  EXPECT_TRUE(contains(b.status.message(), "'alice'")) << b.status.message();
  (*alice)->close();
  (*bob)->close();
  alice->reset();
  bob->reset();
}

}  // namespace
}  // namespace tictac::verbs::testing
