// Frames per small message, counted on the loopback backend (loopback::FrameTally): at default
// settings an 8-byte ping-pong costs one frame per message (the ANNOUNCE carries the data) and
// returns its eager credit on the reply instead of in CREDIT frames. Counter-check in the same
// test: TICTAC_INLINE=0 (config.inline_small = false) costs ANNOUNCE + DATA per message.
#include <gtest/gtest.h>

#include "tests/conformance/harness.h"

namespace tictac::transport::testing {
namespace {

using wire::FrameType;

struct Counts {
  std::uint64_t announce, data, credit, inline_announces, piggybacks, advert;
};

Counts snapshot(const loopback::FrameTally& t) {
  return Counts{t.of(FrameType::announce), t.of(FrameType::data), t.of(FrameType::credit),
                t.inline_announces.load(), t.credit_piggybacks.load(), t.of(FrameType::advert)};
}

// Runs `rounds` round trips of `bytes`-byte messages alice -> bob -> alice and returns the frames
// they cost. `receives_first`: each receive is posted (and acknowledged by a completed round of
// the loop) before its send, so that it is waiting when the message is announced.
Counts ping_pong(const TransportConfig& config, int rounds, std::size_t bytes = 8,
                 bool receives_first = false) {
  auto tally = std::make_shared<loopback::FrameTally>();
  auto fabric = loopback::create_fabric();
  loopback::Faults f;
  f.tally = tally;
  loopback::inject(*fabric, f);
  const BackendKind kind = all_backends()[0];  // loopback
  auto a = make_context(kind, fabric, {"alice", ProgressEngine::Mode::thread, config});
  auto b = make_context(kind, fabric, {"bob", ProgressEngine::Mode::thread, config});
  PeerId ab = 0, ba = 0;
  EXPECT_TRUE(a && b && connect_pair(*a, *b, "loopback://", &ab, &ba));
  if (!a || !b) return {};
  Buffer ping(bytes, 3, true), pong(bytes, 4, true), ping_in(bytes), pong_in(bytes);
  const Counts before = snapshot(*tally);
  for (int i = 0; i < rounds; ++i) {
    Recorder rec;
    if (receives_first) {
      b->recv(ba, 7, ping_in.region, 0, bytes, rec.make("ping"));
      a->recv(ab, 8, pong_in.region, 0, bytes, rec.make("pong"));
    }
    a->send(ab, 7, ping.region, 0, bytes, 0, rec.make("ping-sent"));
    if (!receives_first) b->recv(ba, 7, ping_in.region, 0, bytes, rec.make("ping"));
    EXPECT_TRUE(rec.wait_label("ping"));
    b->send(ba, 8, pong.region, 0, bytes, 0, rec.make("pong-sent"));
    if (!receives_first) a->recv(ab, 8, pong_in.region, 0, bytes, rec.make("pong"));
    EXPECT_TRUE(rec.wait(4));
    for (const Completion& c : rec.all()) EXPECT_TRUE(c.status.ok()) << c.label << ": " << c.status.to_string();
  }
  const Counts after = snapshot(*tally);
  EXPECT_TRUE(same_bytes(ping_in.bytes.data(), bytes, 3));
  EXPECT_TRUE(same_bytes(pong_in.bytes.data(), bytes, 4));
  a->close();
  b->close();
  a->join();
  b->join();
  return Counts{after.announce - before.announce, after.data - before.data, after.credit - before.credit,
                after.inline_announces - before.inline_announces, after.piggybacks - before.piggybacks,
                after.advert - before.advert};
}

TEST(FrameCount, SmallMessageIsOneFrameAndItsCreditRidesOnTheReply) {
  constexpr int kRounds = 40;
  constexpr std::uint64_t kMessages = 2 * kRounds;
  TransportConfig config;  // defaults: chunk 1 MiB, eager 256 KiB, inline on
  // Receives are posted after the sends here, so no advert is involved whatever the timing: every
  // message is eager (unexpected or matched on arrival) and returns credit.
  config.max_adverts = 0;
  const Counts on = ping_pong(config, kRounds);
  EXPECT_EQ(on.announce, kMessages);
  EXPECT_EQ(on.inline_announces, kMessages) << "every 8-byte message should travel as one frame";
  EXPECT_EQ(on.data, 0u);
  // Batched credit: 8 bytes a message never reaches half the pool; the reply carries it. A
  // watchdog round (at most one a second) may flush what is owed at that moment.
  EXPECT_LE(on.credit, 2u) << "CREDIT frames: credit should ride on the replies";
  EXPECT_GE(on.piggybacks, kMessages - 2);

  // Counter-check: with inline ANNOUNCEs off, the same traffic costs ANNOUNCE + DATA.
  config.inline_small = false;
  const Counts off = ping_pong(config, kRounds);
  EXPECT_EQ(off.announce, kMessages);
  EXPECT_EQ(off.inline_announces, 0u);
  EXPECT_EQ(off.data, kMessages) << "TICTAC_INLINE=0 should send a DATA frame per message";
}

// Receives of at most kAdvertMinBytes are not advertised: their messages go eagerly at once, and
// an ADVERT would be a second frame per message (a second UCX active message). Counter-check: the
// same traffic with 4 KiB messages is advertised (so the first count is the threshold's doing,
// not a timing in which no receive was waiting).
TEST(FrameCount, SmallPostedReceivesAreNotAdvertised) {
  constexpr int kRounds = 20;
  TransportConfig config;  // adverts on (1024)
  ASSERT_GT(config.max_adverts, 0u);
  const Counts small = ping_pong(config, kRounds, 8, /*receives_first=*/true);
  EXPECT_EQ(small.advert, 0u);
  EXPECT_EQ(small.inline_announces, 2u * kRounds) << "each small message is still one frame";
  const Counts larger = ping_pong(config, kRounds, 4096, /*receives_first=*/true);
  EXPECT_GT(larger.advert, 0u) << "4 KiB receives posted first should be advertised";
}

}  // namespace
}  // namespace tictac::transport::testing
