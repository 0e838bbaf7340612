// Verbs backend admission: what a peer must pass before the acceptor commits resources to it.
// A side-channel client that does not prove TICTAC_AUTH_TOKEN (no token, a wrong one, or raw
// QpInfo bytes instead of the handshake) and an authenticated peer that announces sizes over
// TICTAC_VERBS_MAX_PEER_SLOT_BYTES / TICTAC_VERBS_MAX_PEER_RING_SLOTS cost the acceptor no memory
// registration, no QP and no other verbs object (counted on the fake fabric). Counter-checks: the
// same client with the right token and in-limit sizes does register memory, and raising the limit
// admits the large peer, so the counters measure what the gate prevents.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "tests/unit/verbs/backend_harness.h"
#include "transport/verbs/backend/qp_info.h"

namespace tictac::verbs::testing {
namespace {

const std::string kToken = "admission-test-token-0123456789";

VerbsConfig acceptor_config() {
  VerbsConfig c;
  c.slot_bytes = 4096;
  c.ring_slots = 2;  // bounds the staging ring a large peer makes us register (2 x its slot)
  c.signal_every = 1;
  return c;
}

QpInfo client_info(std::uint32_t slot_bytes, std::uint32_t ring_slots = 2) {
  QpInfo q;
  q.mtu = IBV_MTU_1024;
  q.lid = 1;
  q.data_qpn = 0x777001;  // no such QP: the acceptor's RTR may fail, but only after registering
  q.ctrl_qpn = 0x777002;
  q.ring_addr = 0x10000;
  q.ring_rkey = 1;
  q.ring_slots = ring_slots;
  q.slot_bytes = slot_bytes;
  q.ctrl_recvs = ring_slots;
  q.psn = 1;
  return q;
}

// What the raw client does on the side channel.
struct ClientPlan {
  bool authenticate = true;          // false: sends the QpInfo at once (no handshake)
  std::optional<std::string> token;  // its token when it authenticates
  QpInfo info = client_info(4096);
};

class Admission : public ::testing::Test {
 protected:
  void SetUp() override { start_acceptor(acceptor_config()); }

  void start_acceptor(const VerbsConfig& config, std::uint32_t max_handshakes = 64,
                      std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10)) {
    backend_.reset();
    engine_ = std::move(transport::ProgressEngine::create(transport::ProgressEngine::Mode::manual))
                  .value();
    backend_ = create(fabric_.api(), config);
    backend_->set_auth_token(kToken);
    backend_->set_handshake_limits(max_handshakes, handshake_timeout);
    ASSERT_TRUE(backend_->attach(*engine_).ok());
    Result<std::string> addr = backend_->listen(
        "127.0.0.1:0",
        [this](std::unique_ptr<transport::Endpoint> ep) { accepted_.push_back(std::move(ep)); });
    ASSERT_TRUE(addr.ok()) << addr.status().to_string();
    address_ = addr->substr(8);
  }

  void TearDown() override {
    for (auto& ep : accepted_) ep->close();
    accepted_.clear();
    if (backend_) backend_->shutdown();
    backend_.reset();
    engine_.reset();
    EXPECT_EQ(fabric_.live_objects(), 0u) << "verbs objects left behind";
  }

  // Runs the client on a helper thread while this thread drives the acceptor's loop; returns
  // the client's auth error ("" when it passed or did not authenticate).
  std::string run_client(const ClientPlan& plan) {
    std::atomic<bool> done{false};
    std::string auth_error;
    std::thread client([&] {
      const int fd = connect_blocking(address_);
      if (fd < 0) {
        auth_error = "cannot connect";
        done = true;
        return;
      }
      std::vector<std::byte> leftover;
      if (plan.authenticate)
        auth_error = blocking_side_auth(fd, auth::Role::initiator, plan.token, &leftover);
      if (auth_error.empty()) {
        const auto bytes = encode(plan.info);
        (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        timeval tv{5, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        std::byte answer[kQpInfoBytes];
        (void)::recv(fd, answer, sizeof answer,
                     MSG_WAITALL);  // the acceptor's QpInfo, or its close
      }
      ::close(fd);
      done = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done && std::chrono::steady_clock::now() < deadline)
      engine_->progress(std::chrono::milliseconds(1));
    for (int i = 0; i < 50; ++i)
      engine_->progress(std::chrono::milliseconds(1));  // let the acceptor finish
    client.join();
    EXPECT_TRUE(done.load()) << "the client hung";
    return auth_error;
  }

  // Drives the acceptor's loop until the raw client socket `fd` is closed by the acceptor (EOF or
  // reset; bytes it sends, such as its handshake's first message, are read and ignored), or
  // `within` passes (false).
  bool closed_by_acceptor(int fd, std::chrono::milliseconds within) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      engine_->progress(std::chrono::milliseconds(1));
      char b[256];
      const ssize_t n = ::recv(fd, b, sizeof b, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return true;
    }
    return false;
  }

  fake::FakeFabric fabric_{threaded_fabric()};
  std::unique_ptr<transport::ProgressEngine> engine_;
  std::unique_ptr<transport::Backend> backend_;
  std::vector<std::unique_ptr<transport::Endpoint>> accepted_;
  std::string address_;
};

struct Cost {
  std::uint64_t mrs;
  std::uint64_t bytes;
  std::size_t objects;
};

Cost cost_of(const fake::FakeFabric& f) {
  const fake::RegistrationStats r = f.registration_stats();
  return {r.mrs_registered, r.bytes_registered, f.live_objects()};
}

TEST_F(Admission, ClientWithoutTokenIsRefusedAndCostsNothing) {
  const Cost before = cost_of(fabric_);
  const std::string why = run_client(ClientPlan{true, std::nullopt, client_info(4096)});
  EXPECT_NE(why, "");
  EXPECT_NE(why.find("token"), std::string::npos) << why;
  const Cost after = cost_of(fabric_);
  EXPECT_EQ(after.mrs, before.mrs);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.objects, before.objects);
  EXPECT_TRUE(accepted_.empty());
}

TEST_F(Admission, ClientWithAWrongTokenIsRefusedAndCostsNothing) {
  const Cost before = cost_of(fabric_);
  const std::string why =
      run_client(ClientPlan{true, std::string("a-different-token-0123456789"), client_info(4096)});
  EXPECT_NE(why, "");
  const Cost after = cost_of(fabric_);
  EXPECT_EQ(after.mrs, before.mrs);
  EXPECT_EQ(after.objects, before.objects);
  EXPECT_TRUE(accepted_.empty());
}

TEST_F(Admission, RawQpInfoWithoutHandshakeCostsNothing) {
  const Cost before = cost_of(fabric_);
  // The old protocol's first message, asking for a 64 MiB x 32 staging ring: refused as a
  // malformed handshake before anything is created.
  EXPECT_EQ(run_client(ClientPlan{false, std::nullopt, client_info(64u << 20, 32)}), "");
  const Cost after = cost_of(fabric_);
  EXPECT_EQ(after.mrs, before.mrs);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.objects, before.objects);
  EXPECT_TRUE(accepted_.empty());
}

TEST_F(Admission, CounterCheckAnAuthenticatedInLimitPeerDoesRegister) {
  const Cost before = cost_of(fabric_);
  EXPECT_EQ(run_client(ClientPlan{true, kToken, client_info(4096)}), "");
  const Cost after = cost_of(fabric_);
  EXPECT_GE(after.mrs, before.mrs + 2) << "receive ring and staging ring";
  EXPECT_GE(after.bytes - before.bytes, 2u * (4096 + kSlotHeaderRoom));
}

TEST_F(Admission, OversizedSlotIsRefusedBeforeAnyRegistration) {
  const Cost before = cost_of(fabric_);
  EXPECT_EQ(run_client(ClientPlan{true, kToken, client_info(8u << 20)}),
            "");  // 8 MiB > 1 MiB default
  const Cost after = cost_of(fabric_);
  EXPECT_EQ(after.mrs, before.mrs);
  EXPECT_EQ(after.bytes, before.bytes);
  EXPECT_EQ(after.objects, before.objects);
  EXPECT_TRUE(accepted_.empty());
}

TEST_F(Admission, TooManyRingSlotsAreRefusedBeforeAnyRegistration) {
  const Cost before = cost_of(fabric_);
  EXPECT_EQ(run_client(ClientPlan{true, kToken, client_info(4096, 4096)}), "");  // > 1024 default
  const Cost after = cost_of(fabric_);
  EXPECT_EQ(after.mrs, before.mrs);
  EXPECT_EQ(after.objects, before.objects);
}

TEST_F(Admission, CounterCheckRaisingTheLimitAdmitsTheLargePeer) {
  VerbsConfig c = acceptor_config();
  c.max_peer_slot_bytes = 8u << 20;
  start_acceptor(c);
  const Cost before = cost_of(fabric_);
  EXPECT_EQ(run_client(ClientPlan{true, kToken, client_info(8u << 20)}), "");
  const Cost after = cost_of(fabric_);
  EXPECT_GE(after.bytes - before.bytes, 2u * (8u << 20)) << "its staging ring: 2 slots of 8 MiB";
}

TEST_F(Admission, PastTheHandshakeCapSideChannelConnectsAreClosedAtOnce) {
  start_acceptor(acceptor_config(), /*max_handshakes=*/2, std::chrono::seconds(30));
  const int idle1 = connect_blocking(address_);
  const int idle2 = connect_blocking(address_);
  ASSERT_GE(idle1, 0);
  ASSERT_GE(idle2, 0);
  for (int i = 0; i < 50; ++i) engine_->progress(std::chrono::milliseconds(1));  // both accepted
  const int third = connect_blocking(address_);
  ASSERT_GE(third, 0);
  EXPECT_TRUE(closed_by_acceptor(third, std::chrono::seconds(10)))
      << "over TICTAC_MAX_HANDSHAKES: closed";
  // Counter-check: the two within the cap are kept, waiting in the handshake.
  EXPECT_FALSE(closed_by_acceptor(idle1, std::chrono::milliseconds(300)));
  EXPECT_FALSE(closed_by_acceptor(idle2, std::chrono::milliseconds(50)));
  ::close(third);
  ::close(idle1);
  ::close(idle2);
  for (int i = 0; i < 200; ++i) engine_->progress(std::chrono::milliseconds(1));  // they see EOF
  // The slots are free again: a proper peer gets in.
  const Cost before = cost_of(fabric_);
  EXPECT_EQ(run_client(ClientPlan{true, kToken, client_info(4096)}), "");
  EXPECT_GE(cost_of(fabric_).mrs, before.mrs + 2);
}

TEST_F(Admission, ASideChannelPeerThatStallsIsClosedAfterTheHandshakeTimeout) {
  start_acceptor(acceptor_config(), 64, std::chrono::milliseconds(300));
  const int idle = connect_blocking(address_);
  ASSERT_GE(idle, 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(closed_by_acceptor(idle, std::chrono::seconds(20)));
  // Not a timing check (the bound is generous): it was the timer, not the 10 s default.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(9));
  ::close(idle);
}

TEST(PeerLimits, ErrorsNameTheVariableAndTheValue) {
  VerbsConfig c;
  Status st = check_peer_limits(client_info(8u << 20), c);
  EXPECT_EQ(st.code(), StatusCode::resource_exhausted);
  EXPECT_NE(st.message().find("TICTAC_VERBS_MAX_PEER_SLOT_BYTES"), std::string::npos)
      << st.to_string();
  EXPECT_NE(st.message().find(std::to_string(8u << 20)), std::string::npos) << st.to_string();
  st = check_peer_limits(client_info(4096, 2048), c);
  EXPECT_NE(st.message().find("TICTAC_VERBS_MAX_PEER_RING_SLOTS"), std::string::npos)
      << st.to_string();
  // The limits never refuse a peer configured like this side.
  c.slot_bytes = 4u << 20;
  c.ring_slots = 2048;
  c.cq_entries = 5 * 2048;
  EXPECT_TRUE(check_peer_limits(client_info(4u << 20, 2048), c).ok());
  EXPECT_TRUE(check_peer_limits(client_info(4096), VerbsConfig{}).ok());
}

}  // namespace
}  // namespace tictac::verbs::testing
