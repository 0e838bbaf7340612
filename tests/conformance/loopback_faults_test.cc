// Fault injection through the loopback backend: delayed frames, a connection dropped mid-transfer
// and a corrupted header. Peers are Contexts in this process.
#include <gtest/gtest.h>

#include "tests/conformance/harness.h"

namespace tictac::transport::testing {
namespace {

BackendKind loopback_kind() { return all_backends()[0]; }

struct FaultPair {
  explicit FaultPair(const loopback::Faults& faults, TransportConfig config = small_config()) {
    loopback::inject(*fabric, faults);
    a = make_context(loopback_kind(), fabric, {"alice", ProgressEngine::Mode::thread, config});
    b = make_context(loopback_kind(), fabric, {"bob", ProgressEngine::Mode::thread, config});
    ok = a && b && connect_pair(*a, *b, "loopback://", &ab, &ba);
  }
  std::shared_ptr<loopback::Fabric> fabric = loopback::create_fabric();
  std::unique_ptr<Context> a, b;
  PeerId ab = 0, ba = 0;
  bool ok = false;
};

TEST(LoopbackFaults, DelayedFramesStillArriveInOrderAndIntact) {
  loopback::Faults f;
  f.delay = std::chrono::microseconds(500);
  FaultPair p(f);
  ASSERT_TRUE(p.ok);
  const int n = 10;
  std::vector<std::unique_ptr<Buffer>> src, dst;
  Recorder rec;
  for (int i = 0; i < n; ++i) {
    const std::size_t size = i % 2 == 0 ? 200 << 10 : 500 + i;
    src.push_back(std::make_unique<Buffer>(size, 40 + i, true));
    dst.push_back(std::make_unique<Buffer>(200 << 10));
    p.b->recv(p.ba, 1, dst[i]->region, 0, 200 << 10, rec.make(L("r", i)));
  }
  for (int i = 0; i < n; ++i) p.a->send(p.ab, 1, src[i]->region, 0, src[i]->bytes.size(), 0, rec.make("s"));
  ASSERT_TRUE(rec.wait(2 * n));
  for (int i = 0; i < n; ++i) {
    Completion r = rec.find(L("r", i));
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    ASSERT_EQ(r.bytes, src[i]->bytes.size());
    EXPECT_TRUE(same_bytes(dst[i]->bytes.data(), r.bytes, 40 + i));
  }
}

TEST(LoopbackFaults, DroppedConnectionFailsEveryPendingAndLaterRequest) {
  loopback::Faults f;
  f.drop_after_frames = 12;  // 2 HELLOs, then the transfer below breaks part-way
  TransportConfig config = small_config();
  config.window_chunks = 1;
  FaultPair p(f, config);
  ASSERT_TRUE(p.ok);
  Buffer big(4 << 20, 1, true), dst(4 << 20), other(100);
  Recorder rec;
  p.b->recv(p.ba, 1, dst.region, 0, dst.bytes.size(), rec.make("b-recv"));
  p.b->recv(p.ba, 2, other.region, 0, 100, rec.make("b-recv-other"));
  p.a->recv(p.ab, 3, other.region, 0, 100, rec.make("a-recv"));
  p.a->send(p.ab, 1, big.region, 0, big.bytes.size(), 0, rec.make("a-send"));
  ASSERT_TRUE(rec.wait(4));
  for (const Completion& c : rec.all()) {
    EXPECT_EQ(c.status.code(), StatusCode::connection_lost) << c.label << ": " << c.status.to_string();
  }
  EXPECT_NE(rec.find("b-recv").status.message().find("alice"), std::string::npos);
  EXPECT_NE(rec.find("a-send").status.message().find("bob"), std::string::npos);
  EXPECT_NE(rec.find("a-send").status.message().find("dropped"), std::string::npos);
  p.a->send(p.ab, 9, big.region, 0, 10, 0, rec.make("later"));
  ASSERT_TRUE(rec.wait(5));
  EXPECT_EQ(rec.find("later").status.code(), StatusCode::connection_lost);
  // The contexts themselves are fine: a new connection works.
  loopback::inject(*p.fabric, loopback::Faults{});
  PeerId ab2 = 0, ba2 = 0;
  ASSERT_TRUE(connect_pair(*p.a, *p.b, "loopback://again", &ab2, &ba2));
  Buffer s(1000, 5, true), d(1000);
  p.b->recv(ba2, 1, d.region, 0, 1000, rec.make("r2"));
  p.a->send(ab2, 1, s.region, 0, 1000, 0, rec.make("s2"));
  ASSERT_TRUE(rec.wait(7));
  EXPECT_TRUE(rec.find("r2").status.ok());
  EXPECT_TRUE(same_bytes(d.bytes.data(), 1000, 5));
}

TEST(LoopbackFaults, CorruptedHeaderIsAProtocolErrorNamingThePeer) {
  loopback::Faults f;
  f.corrupt_header_at = 5;  // 2 HELLOs, then a's third ANNOUNCE
  // Frame numbers must not depend on thread timing: b's receive would send an ADVERT that races
  // a's ANNOUNCEs for a frame number, so adverts are off here.
  TransportConfig config = small_config();
  config.max_adverts = 0;
  FaultPair p(f, config);
  ASSERT_TRUE(p.ok);
  Buffer src(300 << 10, 1, true), dst(100);
  Recorder rec;
  p.b->recv(p.ba, 77, dst.region, 0, 100, rec.make("b-recv"));
  // Rendezvous-sized and never received: only ANNOUNCE frames flow (frames 3, 4, 5).
  for (int i = 0; i < 3; ++i) p.a->send(p.ab, i, src.region, 0, src.bytes.size(), 0, rec.make("a-send"));
  ASSERT_TRUE(rec.wait(4));
  const Completion r = rec.find("b-recv");
  EXPECT_EQ(r.status.code(), StatusCode::protocol_error) << r.status.to_string();
  EXPECT_NE(r.status.message().find("bad magic"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("alice"), std::string::npos) << r.status.message();
  for (const Completion& c : rec.all()) {
    if (c.label == "a-send") {
      EXPECT_EQ(c.status.code(), StatusCode::connection_lost) << c.status.to_string();
    }
  }
}

}  // namespace
}  // namespace tictac::transport::testing
