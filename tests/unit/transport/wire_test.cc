#include "transport/wire.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "transport/handshake.h"

namespace tictac::transport::wire {
namespace {

Header data_header() {
  Header h;
  h.type = FrameType::data;
  h.tag = 77;
  h.msg_id = 5;
  h.offset = 4096;
  h.total = 10000;
  h.priority = -2;
  h.length = 1000;
  return h;
}

TEST(Wire, RoundTripsEveryField) {
  Header h = data_header();
  HeaderBytes b = encode(h);
  Result<Header> d = decode(b);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->type, FrameType::data);
  EXPECT_EQ(d->tag, 77u);
  EXPECT_EQ(d->msg_id, 5u);
  EXPECT_EQ(d->offset, 4096u);
  EXPECT_EQ(d->total, 10000u);
  EXPECT_EQ(d->priority, -2);
  EXPECT_EQ(d->length, 1000u);
}

TEST(Wire, LayoutIsLittleEndianAndFixed) {
  Header h;
  h.type = FrameType::credit;
  h.total = 0x0102030405060708ull;
  HeaderBytes b = encode(h);
  EXPECT_EQ(b.size(), 56u);
  EXPECT_EQ(static_cast<int>(b[0]), 'T');
  EXPECT_EQ(static_cast<int>(b[1]), 'T');
  EXPECT_EQ(static_cast<int>(b[2]), 'A');
  EXPECT_EQ(static_cast<int>(b[3]), 'C');
  EXPECT_EQ(static_cast<int>(b[4]), 3);  // version (kVersion)
  EXPECT_EQ(static_cast<int>(b[6]), 5);  // type credit
  EXPECT_EQ(static_cast<int>(b[32]), 0x08);
  EXPECT_EQ(static_cast<int>(b[39]), 0x01);
}

struct BadCase {
  std::string name;
  std::function<void(Header&, HeaderBytes&)> mutate;  // edit the header, then the bytes
  std::string expect;                                 // part of the message
};

TEST(Wire, RejectsCraftedBadHeaders) {
  const std::vector<BadCase> cases = {
      {"bad magic", [](Header&, HeaderBytes& b) { b[0] = std::byte{'X'}; }, "bad magic"},
      {"bad version", [](Header& h, HeaderBytes&) { h.version = 2; }, "unsupported wire version 2 (this build speaks 3"},
      {"old version", [](Header& h, HeaderBytes&) { h.version = 1; }, "unsupported wire version 1"},
      {"version zero", [](Header& h, HeaderBytes&) { h.version = 0; }, "unsupported wire version 0"},
      {"unknown type", [](Header&, HeaderBytes& b) { b[6] = std::byte{42}; }, "unknown frame type 42"},
      {"type zero", [](Header&, HeaderBytes& b) { b[6] = std::byte{0}; }, "unknown frame type 0"},
      {"offset beyond total", [](Header& h, HeaderBytes&) { h.offset = h.total + 1; h.length = 0; }, "out of range"},
      {"length beyond total", [](Header& h, HeaderBytes&) { h.length = 6000; }, "out of range"},
      {"offset+length overflow", [](Header& h, HeaderBytes&) { h.offset = ~0ull - 10; h.total = ~0ull; h.length = 100; }, "out of range"},
      {"huge chunk", [](Header& h, HeaderBytes&) { h.length = kMaxChunkBytes + 1; h.total = ~0ull; h.offset = 0; }, "maximum chunk"},
      {"flags on data", [](Header& h, HeaderBytes&) { h.flags = kFlagEager; }, "flags"},
      {"unknown flag on announce", [](Header& h, HeaderBytes&) { h.type = FrameType::announce; h.length = 0; h.flags = 0x80; }, "flags"},
      {"eager and claimed", [](Header& h, HeaderBytes&) { h.type = FrameType::announce; h.length = 0; h.offset = 0; h.flags = kFlagEager | kFlagClaimed; }, "flags"},
      {"claimed on data", [](Header& h, HeaderBytes&) { h.flags = kFlagClaimed; }, "flags"},
      {"offset on unclaimed announce", [](Header& h, HeaderBytes&) { h.type = FrameType::announce; h.length = 0; h.offset = 3; }, "claims no advert"},
      {"advert number zero", [](Header& h, HeaderBytes&) { h.type = FrameType::advert; h.length = 0; h.msg_id = 0; }, "ADVERT"},
      {"advert negative ahead", [](Header& h, HeaderBytes&) { h.type = FrameType::advert; h.length = 0; h.msg_id = 4; h.priority = -1; }, "ADVERT"},
      {"payload on advert", [](Header& h, HeaderBytes&) { h.type = FrameType::advert; h.msg_id = 4; }, "no payload"},
      {"aux on data", [](Header& h, HeaderBytes&) { h.aux = 3; }, "aux"},
      {"payload on ready", [](Header& h, HeaderBytes&) { h.type = FrameType::ready; }, "no payload"},
      {"payload on heartbeat", [](Header& h, HeaderBytes&) { h.type = FrameType::heartbeat; h.length = 1; }, "no payload"},
      {"empty hello", [](Header& h, HeaderBytes&) { h.type = FrameType::hello; h.length = 0; }, "HELLO payload"},
      {"huge hello", [](Header& h, HeaderBytes&) { h.type = FrameType::hello; h.length = kMaxHelloBytes + 1; }, "HELLO payload"},
      {"reject without code", [](Header& h, HeaderBytes&) { h.type = FrameType::reject; h.length = 0; h.aux = 0; }, "REJECT"},
      {"reject bad code", [](Header& h, HeaderBytes&) { h.type = FrameType::reject; h.length = 0; h.aux = 200; }, "REJECT"},
      {"zero credit", [](Header& h, HeaderBytes&) { h.type = FrameType::credit; h.length = 0; h.total = 0; }, "CREDIT"},
      {"inline on data", [](Header& h, HeaderBytes&) { h.flags = kFlagInline; }, "flags"},
      {"inline alone", [](Header& h, HeaderBytes&) { h.type = FrameType::announce; h.offset = 0; h.flags = kFlagInline; }, "flags"},
      {"inline short payload", [](Header& h, HeaderBytes&) { h.type = FrameType::announce; h.offset = 0; h.flags = kFlagEager | kFlagInline; h.total = 10; h.length = 9; }, "inline ANNOUNCE"},
      {"inline empty", [](Header& h, HeaderBytes&) { h.type = FrameType::announce; h.offset = 0; h.flags = kFlagEager | kFlagInline; h.total = 0; h.length = 0; }, "inline ANNOUNCE"},
      {"inline huge", [](Header& h, HeaderBytes&) { h.type = FrameType::announce; h.offset = 0; h.flags = kFlagEager | kFlagInline; h.total = kMaxChunkBytes + 1; h.length = kMaxChunkBytes + 1; }, "inline ANNOUNCE"},
      {"payload on plain announce", [](Header& h, HeaderBytes&) { h.type = FrameType::announce; h.offset = 0; h.flags = kFlagEager; h.total = 1000; }, "no payload"},
      {"credit flag without bytes", [](Header& h, HeaderBytes&) { h.flags = kFlagCredit; h.aux = 0; }, "zero credit"},
      {"credit flag on reject", [](Header& h, HeaderBytes&) { h.type = FrameType::reject; h.length = 0; h.flags = kFlagCredit; h.aux = 3; }, "credit flag"},
      {"credit flag on credit", [](Header& h, HeaderBytes&) { h.type = FrameType::credit; h.length = 0; h.flags = kFlagCredit; h.aux = 3; }, "credit flag"},
  };
  for (const BadCase& c : cases) {
    Header h = data_header();
    HeaderBytes unused{};
    c.mutate(h, unused);
    HeaderBytes b = encode(h);
    c.mutate(h, b);  // byte-level edits land on the encoded form
    Result<Header> d = decode(b);
    ASSERT_FALSE(d.ok()) << c.name;
    EXPECT_EQ(d.status().code(), StatusCode::protocol_error) << c.name;
    EXPECT_NE(d.status().message().find(c.expect), std::string::npos)
        << c.name << ": " << d.status().message();
  }
}

TEST(Wire, InlineAnnounceAndPiggybackedCreditRoundTrip) {
  Header h;
  h.type = FrameType::announce;
  h.flags = kFlagClaimed | kFlagInline | kFlagCredit;
  h.tag = 7;
  h.msg_id = 9;
  h.offset = 4;  // the advert claimed
  h.total = 8;
  h.length = 8;
  h.aux = 4096;  // credit returned
  Result<Header> d = decode(encode(h));
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->flags, h.flags);
  EXPECT_EQ(d->aux, 4096u);
  EXPECT_EQ(d->length, 8u);
  Header hb;
  hb.type = FrameType::heartbeat;
  hb.flags = kFlagCredit;
  hb.aux = 1;
  EXPECT_TRUE(decode(encode(hb)).ok());
}

TEST(Wire, TruncatedHeaders) {
  HeaderBytes b = encode(data_header());
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{8}, kHeaderBytes - 1}) {
    Result<Header> d = decode(std::span<const std::byte>(b.data(), n));
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::protocol_error);
    EXPECT_NE(d.status().message().find("truncated"), std::string::npos);
  }
}

TEST(Wire, DataAgainstThePostedBuffer) {
  Header h = data_header();  // offset 4096, length 1000
  EXPECT_TRUE(check_data_fits(h, 4096, 10000).ok());
  EXPECT_TRUE(check_data_fits(h, 4096, 5096).ok());
  Status beyond = check_data_fits(h, 4096, 5095);
  EXPECT_EQ(beyond.code(), StatusCode::protocol_error);
  EXPECT_NE(beyond.message().find("beyond the posted buffer"), std::string::npos);
  Status gap = check_data_fits(h, 0, 10000);
  EXPECT_EQ(gap.code(), StatusCode::protocol_error);
  EXPECT_NE(gap.message().find("offset 4096 out of range"), std::string::npos);
  Status past = check_data_fits(h, 4096, 100);
  EXPECT_EQ(past.code(), StatusCode::protocol_error);
}

TEST(Wire, EveryByteFlipIsEitherRejectedOrStillSane) {
  // A cheap stand-in for fuzzing: no single corrupted byte may produce a header that breaks the
  // invariants decode() promises.
  const HeaderBytes good = encode(data_header());
  for (std::size_t i = 0; i < kHeaderBytes; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      HeaderBytes b = good;
      b[i] ^= static_cast<std::byte>(1 << bit);
      Result<Header> d = decode(b);
      if (!d.ok()) {
        EXPECT_EQ(d.status().code(), StatusCode::protocol_error);
        continue;
      }
      if (d->type == FrameType::data) {
        EXPECT_LE(d->offset, d->total);
        EXPECT_LE(d->length, d->total - d->offset);
        EXPECT_LE(d->length, kMaxChunkBytes);
      } else if (d->type != FrameType::hello) {
        EXPECT_EQ(d->length, 0u);
      }
    }
  }
}

TEST(Handshake, HelloRoundTripAndDefects) {
  HelloInfo info{"worker-3", 65536};
  std::vector<std::byte> body = encode_hello(info);
  Result<HelloInfo> d = decode_hello(body);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->name, "worker-3");
  EXPECT_EQ(d->eager_bytes, 65536u);
  EXPECT_TRUE(verify_hello(info, *d).ok());

  auto expect_bad = [](std::vector<std::byte> b, const char* what) {
    Result<HelloInfo> r = decode_hello(b);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), StatusCode::protocol_error) << what;
  };
  expect_bad({}, "empty");
  expect_bad(std::vector<std::byte>(body.begin(), body.begin() + 10), "truncated");
  auto b = body;
  b[0] = std::byte{0};
  expect_bad(b, "magic");
  b = body;
  b[4] = std::byte{9};
  expect_bad(b, "body version");
  b = body;
  b.push_back(std::byte{'x'});
  expect_bad(b, "trailing byte");
  b = body;
  b[6] = std::byte{0};
  expect_bad(b, "empty name");
  b = body;
  b[16] = std::byte{0};
  expect_bad(b, "NUL in name");
  HelloInfo greedy{"x", std::uint64_t{1} << 50};
  EXPECT_EQ(verify_hello(info, greedy).code(), StatusCode::protocol_error);
}

}  // namespace
}  // namespace tictac::transport::wire
