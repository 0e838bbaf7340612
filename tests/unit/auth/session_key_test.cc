// TICTAC_AUTH_MAC in the handshake: the frame-MAC flag is negotiated (a mismatch is refused on
// both sides naming the variable), needs a token, and both sides derive the same per-direction
// session keys, which differ per direction and per connection.
#include <gtest/gtest.h>

#include "transport/auth/handshake.h"

namespace tictac::auth {
namespace {

const std::string kToken = "0123456789abcdef-shared-secret";

struct Pair {
  Handshake initiator;
  Handshake acceptor;
};

Pair start(bool mac_i, bool mac_a, std::optional<std::string> token = kToken) {
  HandshakeConfig ci;
  ci.role = Role::initiator;
  ci.token = token;
  ci.frame_mac = mac_i;
  HandshakeConfig ca = ci;
  ca.role = Role::acceptor;
  ca.frame_mac = mac_a;
  auto i = Handshake::start(ci);
  auto a = Handshake::start(ca);
  EXPECT_TRUE(i.ok() && a.ok());
  return Pair{std::move(*i), std::move(*a)};
}

void run(Pair& p) {
  for (int round = 0; round < 10; ++round) {
    bool moved = false;
    for (Role from : {Role::initiator, Role::acceptor}) {
      Handshake& src = from == Role::initiator ? p.initiator : p.acceptor;
      Handshake& dst = from == Role::initiator ? p.acceptor : p.initiator;
      Bytes bytes = src.take_output();
      if (bytes.empty()) continue;
      moved = true;
      if (!dst.done() && !dst.failed()) (void)dst.feed(bytes);
    }
    if (!moved) return;
  }
}

TEST(SessionKeys, BothSidesDeriveTheSameKeyPerDirection) {
  Pair p = start(true, true);
  run(p);
  ASSERT_TRUE(p.initiator.frame_mac() && p.acceptor.frame_mac());
  auto ki = p.initiator.session_keys();
  auto ka = p.acceptor.session_keys();
  ASSERT_TRUE(ki.ok() && ka.ok());
  EXPECT_EQ(ki->send, ka->receive);
  EXPECT_EQ(ki->receive, ka->send);
  EXPECT_NE(ki->send, ki->receive);  // one key per direction
  // Another connection (fresh nonces), same token: other keys.
  Pair q = start(true, true);
  run(q);
  auto k2 = q.initiator.session_keys();
  ASSERT_TRUE(k2.ok());
  EXPECT_NE(k2->send, ki->send);
}

TEST(SessionKeys, MatchesTheDocumentedDerivation) {
  Nonce ni{}, na{};
  ni.fill(1);
  na.fill(2);
  auto k = derive_session_key(kToken, ni, na, Role::initiator);
  ASSERT_TRUE(k.ok());
  // Changing any input changes the key.
  na[31] = 3;
  auto k2 = derive_session_key(kToken, ni, na, Role::initiator);
  auto k3 = derive_session_key(kToken, ni, ni, Role::acceptor);
  auto k4 = derive_session_key(kToken + "x", ni, na, Role::initiator);
  ASSERT_TRUE(k2.ok() && k3.ok() && k4.ok());
  EXPECT_NE(*k, *k2);
  EXPECT_NE(*k2, *k3);
  EXPECT_NE(*k2, *k4);
}

TEST(SessionKeys, MacOffMeansNoKeysAndTheSameHelloAsBefore) {
  Pair p = start(false, false);
  run(p);
  ASSERT_TRUE(p.initiator.done() && p.acceptor.done());
  EXPECT_FALSE(p.initiator.frame_mac());
  EXPECT_FALSE(p.initiator.session_keys().ok());
  // Off: the hello's flags byte is exactly "has a token" (byte-identical to a release without
  // TICTAC_AUTH_MAC); on: bit 1 is set as well.
  HandshakeConfig c;
  c.token = kToken;
  auto off = Handshake::start(c);
  c.frame_mac = true;
  auto on = Handshake::start(c);
  ASSERT_TRUE(off.ok() && on.ok());
  const Bytes b_off = off->take_output();
  const Bytes b_on = on->take_output();
  ASSERT_GT(b_off.size(), kHeaderBytes + 1);
  EXPECT_EQ(b_off[kHeaderBytes + 1], kFlagHasToken);
  EXPECT_EQ(b_on[kHeaderBytes + 1], kFlagHasToken | kFlagFrameMac);
}

TEST(SessionKeys, MismatchIsRefusedOnBothSidesNamingTheVariable) {
  for (const bool mac_i : {true, false}) {
    Pair p = start(mac_i, !mac_i);
    run(p);
    ASSERT_TRUE(p.initiator.failed());
    ASSERT_TRUE(p.acceptor.failed());
    EXPECT_EQ(p.acceptor.failure(), HandshakeFailure::mac_mismatch);
    EXPECT_EQ(p.initiator.failure(), HandshakeFailure::refused_by_peer);
    for (const Handshake* h : {&p.initiator, &p.acceptor}) {
      EXPECT_EQ(h->status().code(), StatusCode::protocol_error);
      EXPECT_NE(h->status().message().find("TICTAC_AUTH_MAC=1"), std::string::npos) << h->status().message();
      EXPECT_NE(h->status().message().find("TICTAC_AUTH_MAC=0"), std::string::npos) << h->status().message();
    }
  }
}

TEST(SessionKeys, MacWithoutTokenIsInvalidArgument) {
  HandshakeConfig c;
  c.frame_mac = true;
  auto h = Handshake::start(c);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(h.status().message().find("TICTAC_AUTH_TOKEN"), std::string::npos) << h.status().message();
}

}  // namespace
}  // namespace tictac::auth
