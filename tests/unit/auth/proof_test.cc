// The HMAC proof against an independent computation, and the message codecs.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <array>

#include "transport/auth/messages.h"
#include "transport/auth/proof.h"

namespace tictac::auth {
namespace {

TEST(Proof, MatchesHmacSha256OverTheDocumentedInput) {
  Nonce mine{}, theirs{};
  for (std::size_t i = 0; i < kNonceBytes; ++i) {
    mine[i] = static_cast<std::uint8_t>(i);
    theirs[i] = static_cast<std::uint8_t>(200 - i);
  }
  const std::string token = "a-token-of-enough-length";
  Result<Mac> mac = compute_proof(token, Role::acceptor, mine, theirs);
  ASSERT_TRUE(mac.ok());
  // Independent computation with the streaming HMAC API.
  const std::string context = "tictac-auth-v1";
  std::array<unsigned char, 14 + 1 + 2 * kNonceBytes> input{};
  ASSERT_EQ(context.size(), 14u);
  std::copy(context.begin(), context.end(), input.begin());
  input[14] = 2;  // the acceptor's role byte
  std::copy(mine.begin(), mine.end(), input.begin() + 15);
  std::copy(theirs.begin(), theirs.end(), input.begin() + 15 + kNonceBytes);
  unsigned char expect[32];
  unsigned int len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       input.data(), input.size(), expect, &len);
  ASSERT_EQ(len, 32u);
  EXPECT_TRUE(std::equal(mac->begin(), mac->end(), expect));
  // Role and nonce order matter: no reflection, no swapping.
  EXPECT_FALSE(macs_equal(*mac, *compute_proof(token, Role::initiator, mine, theirs)));
  EXPECT_FALSE(macs_equal(*mac, *compute_proof(token, Role::acceptor, theirs, mine)));
  EXPECT_FALSE(macs_equal(*mac, *compute_proof(token + "x", Role::acceptor, mine, theirs)));
  EXPECT_TRUE(macs_equal(*mac, *compute_proof(token, Role::acceptor, mine, theirs)));
}

TEST(Messages, RoundTripAndStrictParsing) {
  Hello h{Role::acceptor, true, {}};
  h.nonce[3] = 7;
  Bytes b = encode_hello(5, h);
  ASSERT_EQ(b.size(), kHeaderBytes + kHelloBodyBytes);
  Result<Header> hdr = parse_header(b, 5);
  ASSERT_TRUE(hdr.ok());
  EXPECT_EQ(hdr->type, static_cast<std::uint8_t>(MessageType::hello));
  Result<Hello> back = parse_hello(std::span<const std::uint8_t>(b).subspan(kHeaderBytes));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->role, Role::acceptor);
  EXPECT_TRUE(back->has_token);
  EXPECT_EQ(back->nonce, h.nonce);
  // Another version: reported as such, not judged further.
  Result<Header> other = parse_header(b, 4);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->version, 5);
  // Short header.
  EXPECT_EQ(parse_header(std::span<const std::uint8_t>(b).first(8), 5).status().code(), StatusCode::protocol_error);

  Bytes r = encode_result(1, Outcome{false, std::string("bad\x01\nreason")});
  Result<Outcome> o = parse_result(std::span<const std::uint8_t>(r).subspan(kHeaderBytes));
  ASSERT_TRUE(o.ok());
  EXPECT_FALSE(o->accepted);
  EXPECT_EQ(o->reason, "bad??reason");  // control bytes never reach a log
  Bytes longer = encode_result(1, Outcome{false, std::string(5000, 'r')});
  EXPECT_EQ(longer.size(), kMaxMessageBytes);
  EXPECT_FALSE(parse_result(std::vector<std::uint8_t>{0, 'x'}).ok());  // accepted with a reason
  EXPECT_FALSE(parse_result(std::vector<std::uint8_t>{1}).ok());       // refused without one
  EXPECT_FALSE(parse_result(std::vector<std::uint8_t>{2, 'x'}).ok());  // unknown outcome
  EXPECT_FALSE(parse_result(std::vector<std::uint8_t>{1, 'a', 0x07}).ok());
}

TEST(Proof, NoncesAreFresh) {
  Result<Nonce> a = random_nonce();
  Result<Nonce> b = random_nonce();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
}

}  // namespace
}  // namespace tictac::auth
