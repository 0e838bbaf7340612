// FrameMac (transport/frame_mac.h): tags verify in order only; any altered header byte, a replay
// or a skipped frame fails; MAC frames are parsed strictly.
#include "transport/frame_mac.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

namespace tictac::transport {
namespace {

auth::SessionKey key(std::uint8_t fill) {
  auth::SessionKey k{};
  k.fill(fill);
  return k;
}

wire::Header announce(std::uint64_t id) {
  wire::Header h;
  h.type = wire::FrameType::announce;
  h.flags = wire::kFlagEager | wire::kFlagInline;
  h.tag = 42;
  h.msg_id = id;
  h.total = 8;
  h.length = 8;
  h.priority = 3;
  return h;
}

TEST(FrameMac, TagsVerifyInOrder) {
  FrameMac tx(key(7)), rx(key(7));
  for (std::uint64_t i = 1; i <= 5; ++i) {
    auto tag = tx.seal(announce(i));
    ASSERT_TRUE(tag.ok());
    // Through the MAC frame and back.
    auto parsed = FrameMac::parse_tag_frame(FrameMac::make_tag_frame(*tag));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, *tag);
    EXPECT_TRUE(rx.verify(announce(i), *parsed).ok());
  }
  EXPECT_EQ(rx.sequence(), 5u);
}

TEST(FrameMac, TagIsTheDocumentedTruncatedHmac) {
  // tag = first 16 bytes of HMAC-SHA256(key, u64 LE seq || encoded header), seq from 0.
  FrameMac tx(key(7));
  (void)tx.seal(announce(1));
  auto tag = tx.seal(announce(2));  // seq 1
  ASSERT_TRUE(tag.ok());
  std::uint8_t input[8 + wire::kHeaderBytes] = {1};
  const wire::HeaderBytes h = wire::encode(announce(2));
  std::memcpy(input + 8, h.data(), h.size());
  const auth::SessionKey k = key(7);
  std::uint8_t full[32];
  unsigned int len = 0;
  ASSERT_NE(HMAC(EVP_sha256(), k.data(), static_cast<int>(k.size()), input, sizeof(input), full, &len), nullptr);
  EXPECT_EQ(std::memcmp(tag->data(), full, 16), 0);
}

TEST(FrameMac, EveryAlteredHeaderByteFails) {
  FrameMac tx(key(7));
  const wire::Header h = announce(1);
  auto tag = tx.seal(h);
  ASSERT_TRUE(tag.ok());
  const wire::HeaderBytes bytes = wire::encode(h);
  int checked = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    wire::HeaderBytes bad = bytes;
    bad[i] ^= std::byte{0x01};
    auto decoded = wire::decode(bad);
    if (!decoded.ok()) continue;  // caught by the parser already
    FrameMac rx(key(7));
    Status st = rx.verify(*decoded, *tag);
    EXPECT_EQ(st.code(), StatusCode::protocol_error) << "byte " << i;
    EXPECT_NE(st.message().find("frame authentication failed"), std::string::npos);
    EXPECT_EQ(rx.sequence(), 0u);
    ++checked;
  }
  EXPECT_GE(checked, 20);  // tag, msg_id, offset, priority, flags ...: the parser cannot see these
  // Counter-check: the unaltered header verifies.
  FrameMac rx(key(7));
  EXPECT_TRUE(rx.verify(h, *tag).ok());
}

TEST(FrameMac, ReplayAndSkipFail) {
  FrameMac tx(key(7)), rx(key(7));
  auto t1 = tx.seal(announce(1));
  auto t2 = tx.seal(announce(2));
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_FALSE(rx.verify(announce(2), *t2).ok());  // frame 1 skipped (or 2 before 1)
  EXPECT_TRUE(rx.verify(announce(1), *t1).ok());
  EXPECT_FALSE(rx.verify(announce(1), *t1).ok());  // replayed
  EXPECT_TRUE(rx.verify(announce(2), *t2).ok());
}

TEST(FrameMac, OtherKeyFails) {
  FrameMac tx(key(7)), rx(key(8));
  auto t = tx.seal(announce(1));
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(rx.verify(announce(1), *t).ok());
}

TEST(FrameMac, MacFramesAreParsedStrictly) {
  FrameMac::Tag tag{};
  for (std::size_t i = 0; i < tag.size(); ++i) tag[i] = static_cast<std::uint8_t>(i + 1);
  wire::Header m = FrameMac::make_tag_frame(tag);
  EXPECT_TRUE(wire::decode(wire::encode(m)).ok());
  EXPECT_TRUE(FrameMac::parse_tag_frame(m).ok());
  wire::Header bad = m;
  bad.total = 1;
  EXPECT_FALSE(FrameMac::parse_tag_frame(bad).ok());
  bad = m;
  bad.priority = 1;
  EXPECT_FALSE(FrameMac::parse_tag_frame(bad).ok());
  Status st = FrameMac::parse_tag_frame(announce(1)).status();
  EXPECT_NE(st.message().find("expected a MAC frame"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tictac::transport
