// The handshake state machine driven by two in-memory "wires", plus its failure paths.
#include <gtest/gtest.h>

#include <cstdlib>

#include "transport/auth/handshake.h"
#include "transport/auth/token.h"

namespace tictac::auth {
namespace {

const std::string kToken = "0123456789abcdef-shared-secret";
const std::string kOtherToken = "fedcba9876543210-other-secret";

HandshakeConfig config(Role role, std::optional<std::string> token, std::uint16_t version = 1) {
  HandshakeConfig c;
  c.role = role;
  c.token = std::move(token);
  c.protocol_version = version;
  c.peer = role == Role::initiator ? "acceptor-peer" : "initiator-peer";
  return c;
}

// Optional hook that may rewrite bytes in flight (to tamper, truncate or garble them).
using Tamper = std::function<void(Role from, Bytes& bytes)>;

struct Pair {
  Handshake initiator;
  Handshake acceptor;
};

Pair start_pair(std::optional<std::string> ti, std::optional<std::string> ta, std::uint16_t vi = 1,
               std::uint16_t va = 1) {
  auto i = Handshake::start(config(Role::initiator, std::move(ti), vi));
  auto a = Handshake::start(config(Role::acceptor, std::move(ta), va));
  EXPECT_TRUE(i.ok() && a.ok());
  return Pair{std::move(*i), std::move(*a)};
}

// Shuttles output between the two sides until neither has anything to say.
void run(Pair& p, const Tamper& tamper = nullptr) {
  for (int round = 0; round < 10; ++round) {
    bool moved = false;
    for (Role from : {Role::initiator, Role::acceptor}) {
      Handshake& src = from == Role::initiator ? p.initiator : p.acceptor;
      Handshake& dst = from == Role::initiator ? p.acceptor : p.initiator;
      Bytes bytes = src.take_output();
      if (bytes.empty()) continue;
      moved = true;
      if (tamper) tamper(from, bytes);
      if (dst.done() || dst.failed()) continue;
      (void)dst.feed(bytes);
    }
    if (!moved) return;
  }
}

TEST(Handshake, SameTokenAuthenticatesBothSides) {
  Pair p = start_pair(kToken, kToken);
  run(p);
  ASSERT_TRUE(p.initiator.done()) << p.initiator.status().to_string();
  ASSERT_TRUE(p.acceptor.done()) << p.acceptor.status().to_string();
  EXPECT_TRUE(p.initiator.authenticated());
  EXPECT_TRUE(p.acceptor.authenticated());
  EXPECT_EQ(p.initiator.failure(), HandshakeFailure::none);
}

TEST(Handshake, WrongTokenRefusedOnBothSides) {
  // Whichever side holds which token, both end failed and neither is ever "done".
  for (const auto& [ti, ta] : {std::pair{kToken, kOtherToken}, std::pair{kOtherToken, kToken}}) {
    Pair p = start_pair(ti, ta);
    run(p);
    ASSERT_TRUE(p.initiator.failed());
    ASSERT_TRUE(p.acceptor.failed());
    // The initiator checks the acceptor's proof first and refuses it.
    EXPECT_EQ(p.initiator.failure(), HandshakeFailure::bad_proof);
    EXPECT_EQ(p.initiator.status().code(), StatusCode::protocol_error);
    EXPECT_NE(p.initiator.status().message().find("acceptor-peer"), std::string::npos);
    EXPECT_NE(p.initiator.status().message().find("does not match"), std::string::npos);
    EXPECT_EQ(p.acceptor.failure(), HandshakeFailure::refused_by_peer);
    EXPECT_NE(p.acceptor.status().message().find("proof does not match"), std::string::npos)
        << p.acceptor.status().message();
  }
}

TEST(Handshake, AcceptorRefusesAWrongInitiatorProof) {
  // Tamper with the initiator's proof only: the acceptor's own check must catch it.
  Pair p = start_pair(kToken, kToken);
  run(p, [](Role from, Bytes& bytes) {
    if (from == Role::initiator && bytes.size() == kHeaderBytes + kProofBodyBytes) bytes.back() ^= 0x01;
  });
  ASSERT_TRUE(p.acceptor.failed());
  EXPECT_EQ(p.acceptor.failure(), HandshakeFailure::bad_proof);
  ASSERT_TRUE(p.initiator.failed());
  EXPECT_EQ(p.initiator.failure(), HandshakeFailure::refused_by_peer);
  EXPECT_FALSE(p.initiator.authenticated());
}

TEST(Handshake, TamperedAcceptorMacIsRefused) {
  Pair p = start_pair(kToken, kToken);
  run(p, [](Role from, Bytes& bytes) {
    if (from == Role::acceptor && bytes.size() > kHeaderBytes + kHelloBodyBytes) bytes.back() ^= 0x80;
  });
  EXPECT_EQ(p.initiator.failure(), HandshakeFailure::bad_proof);
  EXPECT_TRUE(p.acceptor.failed());
}

TEST(Handshake, TamperedNonceBreaksTheProof) {
  // Changing the acceptor's nonce in flight makes its (untouched) MAC fail verification.
  Pair p = start_pair(kToken, kToken);
  run(p, [](Role from, Bytes& bytes) {
    if (from == Role::acceptor && bytes.size() > kHeaderBytes + kHelloBodyBytes) bytes[kHeaderBytes + 5] ^= 1;
  });
  EXPECT_EQ(p.initiator.failure(), HandshakeFailure::bad_proof);
}

TEST(Handshake, TokenOnOneSideOnlyIsRefusedNamingTheSideThatLacksIt) {
  {
    Pair p = start_pair(kToken, std::nullopt);
    run(p);
    ASSERT_TRUE(p.acceptor.failed());
    EXPECT_EQ(p.acceptor.failure(), HandshakeFailure::token_missing_here);
    EXPECT_NE(p.acceptor.status().message().find("this side (acceptor) has no TICTAC_AUTH_TOKEN"),
              std::string::npos)
        << p.acceptor.status().message();
    ASSERT_TRUE(p.initiator.failed());
    EXPECT_EQ(p.initiator.failure(), HandshakeFailure::refused_by_peer);
    EXPECT_NE(p.initiator.status().message().find("the initiator has a token, the acceptor has none"),
              std::string::npos)
        << p.initiator.status().message();
  }
  {
    Pair p = start_pair(std::nullopt, kToken);
    run(p);
    ASSERT_TRUE(p.acceptor.failed());
    EXPECT_EQ(p.acceptor.failure(), HandshakeFailure::token_missing_on_peer);
    EXPECT_NE(p.acceptor.status().message().find("the peer (initiator) has none"), std::string::npos)
        << p.acceptor.status().message();
    EXPECT_NE(p.initiator.status().message().find("the acceptor has a token, the initiator has none"),
              std::string::npos)
        << p.initiator.status().message();
    EXPECT_FALSE(p.initiator.done());
  }
}

TEST(Handshake, NoTokenOnEitherSidePassesUnauthenticated) {
  Pair p = start_pair(std::nullopt, std::nullopt);
  run(p);
  ASSERT_TRUE(p.initiator.done());
  ASSERT_TRUE(p.acceptor.done());
  EXPECT_FALSE(p.initiator.authenticated());
  EXPECT_FALSE(p.acceptor.authenticated());
}

TEST(Handshake, VersionMismatchNamesBothVersions) {
  Pair p = start_pair(kToken, kToken, /*vi=*/2, /*va=*/1);
  run(p);
  ASSERT_TRUE(p.acceptor.failed());
  EXPECT_EQ(p.acceptor.failure(), HandshakeFailure::version_mismatch);
  EXPECT_NE(p.acceptor.status().message().find("version 2"), std::string::npos) << p.acceptor.status().message();
  EXPECT_NE(p.acceptor.status().message().find("version 1"), std::string::npos);
  ASSERT_TRUE(p.initiator.failed());
  EXPECT_EQ(p.initiator.failure(), HandshakeFailure::version_mismatch);
  EXPECT_NE(p.initiator.status().message().find("peer speaks TicTac protocol version 1, this side speaks version 2"),
            std::string::npos)
      << p.initiator.status().message();
}

TEST(Handshake, TruncatedMessagesWaitAndGarbledOnesAreProtocolErrors) {
  auto a = Handshake::start(config(Role::acceptor, kToken));
  auto i = Handshake::start(config(Role::initiator, kToken));
  ASSERT_TRUE(a.ok() && i.ok());
  Bytes hello = i->take_output();
  // A truncated message is not an error yet: the machine waits for the rest.
  Result<std::size_t> used = a->feed(std::span<const std::uint8_t>(hello).first(5));
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(*used, 5u);
  EXPECT_FALSE(a->done() || a->failed());
  EXPECT_TRUE(a->take_output().empty());

  // Garbled variants of a valid hello, each fed to a fresh acceptor.
  struct Case {
    const char* what;
    std::size_t offset;
    std::uint8_t value;
    const char* expect;
  };
  const Case cases[] = {
      {"bad magic", 0, 'X', "bad magic"},
      {"unknown type", 6, 9, "unknown message type"},
      {"wrong body length", 7, 33, "hello body is 33 bytes"},
      {"unknown role", kHeaderBytes, 7, "unknown role"},
      {"same role", kHeaderBytes, static_cast<std::uint8_t>(Role::acceptor), "both sides claim"},
      {"unknown flags", kHeaderBytes + 1, 0x83, "unknown flag bits"},
  };
  for (const Case& c : cases) {
    auto fresh = Handshake::start(config(Role::acceptor, kToken));
    ASSERT_TRUE(fresh.ok());
    Bytes bad = hello;
    bad[c.offset] = c.value;
    Result<std::size_t> r = fresh->feed(bad);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), StatusCode::protocol_error) << c.what;
    EXPECT_EQ(fresh->failure(), HandshakeFailure::malformed) << c.what;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << c.what << ": " << r.status().message();
    // The refusal for the peer is a well-formed result message.
    Bytes out = fresh->take_output();
    ASSERT_GE(out.size(), kHeaderBytes) << c.what;
    Result<Header> h = parse_header(out, 1);
    ASSERT_TRUE(h.ok()) << c.what;
    EXPECT_EQ(h->type, static_cast<std::uint8_t>(MessageType::result));
    // A failed handshake stays failed.
    EXPECT_FALSE(fresh->feed(hello).ok());
  }
}

TEST(Handshake, OutOfOrderMessagesAreProtocolErrors) {
  auto a = Handshake::start(config(Role::acceptor, kToken));
  ASSERT_TRUE(a.ok());
  Mac mac{};
  Result<std::size_t> r = a->feed(encode_proof(1, mac));  // proof before hello
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(a->failure(), HandshakeFailure::malformed);
  EXPECT_NE(r.status().message().find("unexpected proof message while waiting for hello"), std::string::npos);

  auto i = Handshake::start(config(Role::initiator, std::nullopt));
  ASSERT_TRUE(i.ok());
  r = i->feed(encode_result(1, Outcome{true, {}}));  // "accepted" before anything happened
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(i->failure(), HandshakeFailure::malformed);
}

TEST(Handshake, ReflectedHelloIsRefused) {
  // A hello that echoes our own nonce (e.g. a connection looped back to itself).
  auto a = Handshake::start(config(Role::acceptor, kToken));
  ASSERT_TRUE(a.ok());
  Result<std::size_t> r = a->feed(encode_hello(1, Hello{Role::initiator, true, a->local_nonce()}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("echoed"), std::string::npos);
}

TEST(Handshake, ByteAtATimeDeliveryAndTrailingBytesAreLeftToTheCaller) {
  Pair p = start_pair(kToken, kToken);
  for (int round = 0; round < 10 && !(p.initiator.done() && p.acceptor.done()); ++round) {
    for (Role from : {Role::initiator, Role::acceptor}) {
      Handshake& src = from == Role::initiator ? p.initiator : p.acceptor;
      Handshake& dst = from == Role::initiator ? p.acceptor : p.initiator;
      Bytes bytes = src.take_output();
      if (from == Role::acceptor && src.done()) {
        // Transport data right behind the last handshake message must not be consumed.
        bytes.push_back(0xAB);
        bytes.push_back(0xCD);
        std::size_t consumed = 0;
        for (std::uint8_t b : bytes) {
          Result<std::size_t> r = dst.feed(std::span<const std::uint8_t>(&b, 1));
          ASSERT_TRUE(r.ok());
          consumed += *r;
        }
        EXPECT_EQ(consumed, bytes.size() - 2);
        continue;
      }
      for (std::uint8_t b : bytes) ASSERT_TRUE(dst.feed(std::span<const std::uint8_t>(&b, 1)).ok());
    }
  }
  EXPECT_TRUE(p.initiator.authenticated());
  EXPECT_TRUE(p.acceptor.authenticated());
}

TEST(Handshake, NoncesDifferBetweenRuns) {
  auto a = Handshake::start(config(Role::initiator, kToken));
  auto b = Handshake::start(config(Role::initiator, kToken));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->local_nonce(), b->local_nonce());
  EXPECT_NE(a->local_nonce(), Nonce{});
  // And so do the hellos on the wire, hence every proof: nothing can be replayed.
  EXPECT_NE(a->take_output(), b->take_output());
}

TEST(Handshake, ShortTokenIsRefusedAtStart) {
  auto h = Handshake::start(config(Role::initiator, std::string("short")));
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(h.status().message().find("at least 16 bytes"), std::string::npos) << h.status().message();
}

TEST(Token, FromEnvironment) {
  ::setenv(kAuthTokenEnv, "too-short", 1);
  auto bad = config_from_env(Role::initiator, "p");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_AUTH_TOKEN is 9 bytes"), std::string::npos)
      << bad.status().message();
  EXPECT_EQ(bad.status().message().find("too-short"), std::string::npos) << "the secret must not be echoed";
  ::setenv(kAuthTokenEnv, kToken.c_str(), 1);
  auto good = config_from_env(Role::acceptor, "p");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->token, kToken);
  ::setenv(kAuthTokenEnv, "", 1);
  auto none = config_from_env(Role::acceptor, "p");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->token.has_value());
  ::unsetenv(kAuthTokenEnv);
  EXPECT_FALSE(validate_token(std::string(kMaxTokenBytes + 1, 'x'), "token").ok());
}

}  // namespace
}  // namespace tictac::auth
