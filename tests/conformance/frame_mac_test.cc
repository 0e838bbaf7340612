// TICTAC_AUTH_MAC (transport/frame_mac.h): round trips with frame MACs over loopback and tcp,
// and an attacker on the path, played by an Endpoint wrapper around the sender's backend that
// alters one header field, replays a frame pair or swaps two pairs. With MACs on the receiver
// fails the connection with "frame authentication failed" naming the peer and delivers nothing
// of the altered frame; the counter-checks run the same attack with MACs off and show that the
// MAC layer is what catches it (the altered header is then accepted, the replay and the swap are
// caught, if at all, only by the message-id check). Also: negotiation mismatch and MAC without a
// token are refused with errors naming the variables.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <vector>

#include "tests/conformance/harness.h"

namespace tictac::transport::testing {
namespace {

const std::string kToken = "frame-mac-test-token-0123456789abcdef";

// What the wrapper does to the first inline ANNOUNCE (a small eager message) sent after arm().
// refuse_after_mac is no attack: the endpoint says "no capacity" to every third frame that
// follows a MAC frame, as a full socket would, to exercise the Connection's retry of that frame.
enum class Attack { none, flip_priority_bit, replay_pair, swap_pairs, refuse_after_mac };

struct AttackPlan {
  std::atomic<Attack> attack{Attack::none};
  std::atomic<bool> armed{false};
  std::atomic<int> fired{0};
};

// Passes everything through except what the plan says; frames it adds itself use cookies with
// the top bit set and their on_sent is swallowed.
class AttackEndpoint final : public Endpoint, private EndpointSink {
 public:
  AttackEndpoint(std::unique_ptr<Endpoint> inner, std::shared_ptr<AttackPlan> plan)
      : inner_(std::move(inner)), plan_(std::move(plan)) {}
  void start(EndpointSink* sink) override {
    sink_ = sink;
    inner_->start(this);
  }
  bool has_capacity() const override { return inner_->has_capacity(); }
  Status post(const wire::Header& h, const std::byte* payload, std::uint64_t cookie) override {
    const Attack attack = plan_->armed ? plan_->attack.load() : Attack::none;
    if (attack == Attack::refuse_after_mac) {
      if (h.type != wire::FrameType::mac && after_mac_ && ++followers_ % 3 == 0 && !refused_now_) {
        refused_now_ = true;  // the very next post (the Connection's retry) is accepted
        owe_writable_ = true;
        ++plan_->fired;
        return Status(StatusCode::resource_exhausted, "test: no capacity after a MAC frame");
      }
      refused_now_ = false;
      after_mac_ = h.type == wire::FrameType::mac;
      return inner_->post(h, payload, cookie);
    }
    if (attack == Attack::none || plan_->fired > 0) return inner_->post(h, payload, cookie);
    if (h.type == wire::FrameType::mac) {  // belongs to the next frame: hold it until we see it
      held_mac_ = h;
      held_mac_cookie_ = cookie;
      return Status::Ok();
    }
    const bool target = h.type == wire::FrameType::announce && (h.flags & wire::kFlagInline) != 0;
    if (!target) return release_then(h, payload, cookie);
    if (attack == Attack::flip_priority_bit) {
      wire::Header t = h;
      t.priority ^= 1;  // one bit of header byte 40
      ++plan_->fired;
      return release_then(t, payload, cookie);
    }
    if (attack == Attack::replay_pair) {
      Status st = release_then(h, payload, cookie);
      if (!st.ok()) return st;
      copies_.emplace_back(payload, payload + h.length);
      if (last_mac_) TICTAC_RETURN_IF_ERROR(inner_->post(*last_mac_, nullptr, own_cookie()));
      ++plan_->fired;
      return inner_->post(h, copies_.back().data(), own_cookie());
    }
    // swap_pairs: keep the first pair back, send it after the second.
    if (!first_) {
      first_ = Held{h, payload, cookie, held_mac_, held_mac_cookie_};
      held_mac_.reset();
      return Status::Ok();
    }
    Status st = release_then(h, payload, cookie);
    if (!st.ok()) return st;
    if (first_->mac) TICTAC_RETURN_IF_ERROR(inner_->post(*first_->mac, nullptr, first_->mac_cookie));
    ++plan_->fired;
    return inner_->post(first_->header, first_->payload, first_->cookie);
  }
  void close() override { inner_->close(); }
  std::string describe() const override { return inner_->describe(); }

 private:
  struct Held {
    wire::Header header;
    const std::byte* payload;
    std::uint64_t cookie;
    std::optional<wire::Header> mac;
    std::uint64_t mac_cookie;
  };
  Status release_then(const wire::Header& h, const std::byte* payload, std::uint64_t cookie) {
    if (held_mac_) {
      last_mac_ = held_mac_;
      TICTAC_RETURN_IF_ERROR(inner_->post(*held_mac_, nullptr, held_mac_cookie_));
      held_mac_.reset();
    }
    return inner_->post(h, payload, cookie);
  }
  std::uint64_t own_cookie() { return (std::uint64_t{1} << 63) | ++own_; }
  Result<Destination> on_header(const wire::Header& h) override { return sink_->on_header(h); }
  void on_frame(const wire::Header& h) override { sink_->on_frame(h); }
  void on_sent(std::uint64_t cookie) override {
    if ((cookie >> 63) == 0) sink_->on_sent(cookie);
    if (owe_writable_) {  // capacity "freed" by the MAC frame that left
      owe_writable_ = false;
      sink_->on_writable();
    }
  }
  void on_writable() override { sink_->on_writable(); }
  void on_failed(const Status& status) override { sink_->on_failed(status); }

  std::unique_ptr<Endpoint> inner_;
  std::shared_ptr<AttackPlan> plan_;
  EndpointSink* sink_ = nullptr;
  std::optional<wire::Header> held_mac_, last_mac_;
  std::uint64_t held_mac_cookie_ = 0;
  std::optional<Held> first_;
  std::deque<std::vector<std::byte>> copies_;
  std::uint64_t own_ = 0;
  bool after_mac_ = false, refused_now_ = false, owe_writable_ = false;
  std::uint64_t followers_ = 0;
};

class AttackBackend final : public Backend {
 public:
  AttackBackend(std::unique_ptr<Backend> inner, std::shared_ptr<AttackPlan> plan)
      : inner_(std::move(inner)), plan_(std::move(plan)) {}
  std::string_view name() const override { return inner_->name(); }
  Viability viability() const override { return inner_->viability(); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  Status attach(ProgressEngine& engine) override { return inner_->attach(engine); }
  Result<std::string> listen(std::string_view address, AcceptFn on_accept) override {
    return inner_->listen(address, [this, on_accept](std::unique_ptr<Endpoint> ep) {
      on_accept(std::make_unique<AttackEndpoint>(std::move(ep), plan_));
    });
  }
  void connect(std::string_view address, Clock::time_point deadline, ConnectFn on_done) override {
    inner_->connect(address, deadline, [this, on_done](Result<std::unique_ptr<Endpoint>> ep) {
      if (!ep.ok()) return on_done(std::move(ep));
      on_done(std::unique_ptr<Endpoint>(std::make_unique<AttackEndpoint>(std::move(ep).value(), plan_)));
    });
  }
  void shutdown() override { inner_->shutdown(); }

 private:
  std::unique_ptr<Backend> inner_;
  std::shared_ptr<AttackPlan> plan_;
};

std::unique_ptr<Context> make(std::unique_ptr<Backend> backend, const std::string& name, bool mac,
                              std::optional<std::string> token = kToken, Status* error = nullptr) {
  ContextOptions o;
  o.name = name;
  o.config = small_config();
  o.config->frame_mac = mac;
  o.config->max_adverts = 0;  // frame order must not depend on thread timing
  o.auth_token = token ? *token : std::string();
  o.backends.push_back(std::move(backend));
  Result<std::unique_ptr<Context>> ctx = Context::create(std::move(o));
  if (error != nullptr) *error = ctx.ok() ? Status::Ok() : ctx.status();
  return ctx.ok() ? std::move(ctx).value() : nullptr;
}

class FrameMac : public ::testing::TestWithParam<BackendKind> {};

TEST_P(FrameMac, RoundTripsWithMacsOnAndMacFramesOnlyWhenOn) {
  for (const bool mac : {true, false}) {
    SCOPED_TRACE(mac ? "TICTAC_AUTH_MAC=1" : "TICTAC_AUTH_MAC=0");
    auto fabric = loopback::create_fabric();
    loopback::Faults faults;
    faults.tally = std::make_shared<loopback::FrameTally>();
    loopback::inject(*fabric, faults);
    auto a = make(GetParam().make(fabric), "alice", mac);
    auto b = make(GetParam().make(fabric), "bob", mac);
    ASSERT_TRUE(a && b);
    PeerId ab = 0, ba = 0;
    ASSERT_TRUE(connect_pair(*a, *b, GetParam().listen_address, &ab, &ba));
    // Inline, eager in chunks, rendezvous, and empty messages, both ways.
    const std::vector<std::size_t> sizes = {8, 1000, 100 << 10, 4 << 20, 0};
    std::vector<std::unique_ptr<Buffer>> src, dst, back_src, back_dst;
    Recorder rec;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      src.push_back(std::make_unique<Buffer>(sizes[i], 10 + i, true));
      dst.push_back(std::make_unique<Buffer>(sizes[i]));
      back_src.push_back(std::make_unique<Buffer>(sizes[i], 50 + i, true));
      back_dst.push_back(std::make_unique<Buffer>(sizes[i]));
      b->recv(ba, i, dst[i]->region, 0, sizes[i], rec.make(L("b", i)));
      a->recv(ab, i, back_dst[i]->region, 0, sizes[i], rec.make(L("a", i)));
      a->send(ab, i, src[i]->region, 0, sizes[i], 0, rec.make("s"));
      b->send(ba, i, back_src[i]->region, 0, sizes[i], 0, rec.make("s"));
    }
    ASSERT_TRUE(rec.wait(4 * sizes.size()));
    for (const Completion& c : rec.all()) EXPECT_TRUE(c.status.ok()) << c.label << ": " << c.status.to_string();
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_TRUE(same_bytes(dst[i]->bytes.data(), sizes[i], 10 + i)) << i;
      EXPECT_TRUE(same_bytes(back_dst[i]->bytes.data(), sizes[i], 50 + i)) << i;
    }
    if (GetParam().name == "loopback") {
      const std::uint64_t macs = faults.tally->of(wire::FrameType::mac);
      if (mac) {
        EXPECT_GT(macs, 10u);
      } else {
        EXPECT_EQ(macs, 0u);  // off: not one extra frame on the wire
      }
    }
  }
}

// Runs `attack` on alice's first small message to bob after the handshake; returns bob's receive.
struct AttackRun {
  Completion recv;   // of message 1 (the attacked one)
  Completion recv2;  // of message 2
  bool delivered_bytes = false;   // any byte of message 1 reached bob's buffer
  bool delivered_bytes2 = false;  // of message 2
};

AttackRun run_attack(const BackendKind& kind, Attack attack, bool mac) {
  auto fabric = loopback::create_fabric();
  auto plan = std::make_shared<AttackPlan>();
  plan->attack = attack;
  auto a = make(std::make_unique<AttackBackend>(kind.make(fabric), plan), "alice", mac);
  auto b = make(kind.make(fabric), "bob", mac);
  AttackRun run;
  if (!a || !b) return run;
  PeerId ab = 0, ba = 0;
  if (!connect_pair(*a, *b, kind.listen_address, &ab, &ba)) return run;
  plan->armed = true;
  Buffer s1(64, 7, true), s2(64, 8, true), d1(64), d2(64);
  Recorder rec;
  b->recv(ba, 1, d1.region, 0, 64, rec.make("r1"));
  b->recv(ba, 2, d2.region, 0, 64, rec.make("r2"));
  a->send(ab, 1, s1.region, 0, 64, 0, rec.make("s1"));
  a->send(ab, 2, s2.region, 0, 64, 0, rec.make("s2"));
  EXPECT_TRUE(rec.wait_label("r1"));
  EXPECT_TRUE(rec.wait_label("r2"));
  EXPECT_TRUE(rec.wait_label("s1"));
  // With MACs off a replayed ANNOUNCE is caught by the message-id check only after r1 and r2 were
  // delivered; give the duplicate time to arrive before the contexts go.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  run.recv = rec.find("r1");
  run.recv2 = rec.find("r2");
  std::vector<std::byte> zeros(64);
  run.delivered_bytes = std::memcmp(d1.bytes.data(), zeros.data(), 64) != 0;
  run.delivered_bytes2 = std::memcmp(d2.bytes.data(), zeros.data(), 64) != 0;
  EXPECT_EQ(plan->fired.load(), 1);
  return run;
}

void expect_caught(const Completion& recv, bool delivered) {
  EXPECT_EQ(recv.status.code(), StatusCode::protocol_error) << recv.status.to_string();
  EXPECT_NE(recv.status.message().find("frame authentication failed"), std::string::npos)
      << recv.status.message();
  EXPECT_NE(recv.status.message().find("alice"), std::string::npos) << recv.status.message();
  EXPECT_FALSE(delivered);  // nothing of the attacked frame was delivered
}

TEST_P(FrameMac, AlteredHeaderByteFailsTheConnection) {
  const AttackRun run = run_attack(GetParam(), Attack::flip_priority_bit, /*mac=*/true);
  expect_caught(run.recv, run.delivered_bytes);
}

TEST_P(FrameMac, CounterCheckAlteredHeaderGoesUnnoticedWithMacsOff) {
  const AttackRun run = run_attack(GetParam(), Attack::flip_priority_bit, /*mac=*/false);
  EXPECT_TRUE(run.recv.status.ok()) << run.recv.status.to_string();  // accepted, priority altered
  EXPECT_TRUE(run.delivered_bytes);
}

TEST_P(FrameMac, ReplayedFramePairFailsTheConnection) {
  const AttackRun run = run_attack(GetParam(), Attack::replay_pair, /*mac=*/true);
  // The original pair is genuine, so message 1 arrives; the byte-identical replay right behind it
  // carries a stale sequence number and fails the connection before message 2.
  EXPECT_TRUE(run.recv.status.ok()) << run.recv.status.to_string();
  expect_caught(run.recv2, run.delivered_bytes2);
}

TEST_P(FrameMac, CounterCheckReplayIsNotCaughtByAMacWithMacsOff) {
  const AttackRun run = run_attack(GetParam(), Attack::replay_pair, /*mac=*/false);
  EXPECT_EQ(run.recv2.status.message().find("frame authentication failed"), std::string::npos)
      << run.recv2.status.message();
}

TEST_P(FrameMac, SwappedFramePairsFailTheConnection) {
  const AttackRun run = run_attack(GetParam(), Attack::swap_pairs, /*mac=*/true);
  expect_caught(run.recv, run.delivered_bytes);
  expect_caught(run.recv2, run.delivered_bytes2);
}

TEST_P(FrameMac, CounterCheckSwappedFramesAreNotCaughtByAMacWithMacsOff) {
  const AttackRun run = run_attack(GetParam(), Attack::swap_pairs, /*mac=*/false);
  EXPECT_EQ(run.recv.status.message().find("frame authentication failed"), std::string::npos)
      << run.recv.status.message();
  EXPECT_TRUE(run.delivered_bytes2);  // message 2, now first, was accepted
}

TEST_P(FrameMac, FrameRefusedAfterItsMacFrameIsRetriedInPlace) {
  // A backend may refuse the second frame of a pair for capacity; the Connection keeps it and
  // posts it before anything else on on_writable(), so the pair stays adjacent.
  auto fabric = loopback::create_fabric();
  auto plan = std::make_shared<AttackPlan>();
  plan->attack = Attack::refuse_after_mac;
  auto a = make(std::make_unique<AttackBackend>(GetParam().make(fabric), plan), "alice", true);
  auto b = make(GetParam().make(fabric), "bob", true);
  ASSERT_TRUE(a && b);
  PeerId ab = 0, ba = 0;
  ASSERT_TRUE(connect_pair(*a, *b, GetParam().listen_address, &ab, &ba));
  plan->armed = true;
  const int n = 60;
  std::vector<std::unique_ptr<Buffer>> src, dst;
  Recorder rec;
  for (int i = 0; i < n; ++i) {
    const std::size_t size = i % 10 == 9 ? (300 << 10) : 100 + i;  // some rendezvous, chunked
    src.push_back(std::make_unique<Buffer>(size, i, true));
    dst.push_back(std::make_unique<Buffer>(size));
    b->recv(ba, 5, dst[i]->region, 0, size, rec.make(L("r", i)));
  }
  for (int i = 0; i < n; ++i) a->send(ab, 5, src[i]->region, 0, src[i]->bytes.size(), 0, rec.make("s"));
  ASSERT_TRUE(rec.wait(2 * n));
  for (const Completion& c : rec.all()) ASSERT_TRUE(c.status.ok()) << c.label << ": " << c.status.to_string();
  for (int i = 0; i < n; ++i) EXPECT_TRUE(same_bytes(dst[i]->bytes.data(), dst[i]->bytes.size(), i)) << i;
  EXPECT_GT(plan->fired.load(), 10);  // the retry path ran
}

TEST_P(FrameMac, MismatchIsRefusedNamingTheVariableOnBothSides) {
  for (const bool client_mac : {true, false}) {
    auto fabric = loopback::create_fabric();
    auto a = make(GetParam().make(fabric), "alice", client_mac);
    auto b = make(GetParam().make(fabric), "bob", !client_mac);
    ASSERT_TRUE(a && b);
    Result<std::string> addr = b->listen(GetParam().listen_address);
    ASSERT_TRUE(addr.ok());
    Result<PeerId> c = a->connect(*addr);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::protocol_error) << c.status().to_string();
    EXPECT_NE(c.status().message().find("TICTAC_AUTH_MAC=1"), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("TICTAC_AUTH_MAC=0"), std::string::npos) << c.status().message();
    EXPECT_FALSE(b->accept(std::chrono::milliseconds(200)).ok());
  }
}

TEST(FrameMacConfig, MacWithoutTokenIsInvalidArgumentNamingTheToken) {
  auto fabric = loopback::create_fabric();
  Status error;
  auto a = make(loopback::create(fabric), "alice", /*mac=*/true, std::nullopt, &error);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(error.code(), StatusCode::invalid_argument) << error.to_string();
  EXPECT_NE(error.message().find("TICTAC_AUTH_TOKEN"), std::string::npos) << error.message();
  // Counter-check: with a token it is created.
  EXPECT_NE(make(loopback::create(fabric), "alice", /*mac=*/true), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Backends, FrameMac, ::testing::ValuesIn(all_backends()),
                         [](const ::testing::TestParamInfo<BackendKind>& info) { return info.param.name; });

}  // namespace
}  // namespace tictac::transport::testing
