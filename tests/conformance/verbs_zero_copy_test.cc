// Zero-copy RDMA WRITE in the verbs backend, between two Contexts on a fake fabric of their own
// (thread mode), so that the fabric's write counters see only this test's traffic:
// - rendezvous messages of at least TICTAC_VERBS_ZERO_COPY_MIN_BYTES land byte-exact, and their
//   payload travels as plain RDMA WRITEs (write_traffic()), the ring carrying headers only;
// - smaller messages, and every message when either side sets TICTAC_VERBS_ZERO_COPY=0, keep
//   the ring (no plain WRITE at all);
// - a corrupted rkey and a revoked destination region fail both peers once, with Statuses that
//   name the peer and the verbs status, and leave no verbs object behind;
// - a receive cancelled while the peer writes into it completes only after the message landed,
//   and nothing touches its buffer afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "tests/conformance/harness.h"
#include "transport/verbs/backend/factory.h"
#include "transport/verbs/fake/fake_fabric.h"

namespace tictac::transport::testing {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TransportConfig rendezvous_config() {
  TransportConfig c = small_config();
  c.eager_bytes = 0;  // every message goes by rendezvous (READY), which is where exports happen
  // Receives posted first would be advertised and their messages claimed: those travel through
  // the ring (no export; see docs/transport.md "Adverts"). These tests are about the READY path.
  c.max_adverts = 0;
  return c;
}

class VerbsZeroCopy : public ::testing::Test {
 protected:
  void TearDown() override {
    a_.reset();
    b_.reset();
    EXPECT_EQ(fabric_.live_objects(), 0u) << "verbs objects left behind";
  }

  std::unique_ptr<Context> context(const std::string& name, const verbs::VerbsConfig& vc, const TransportConfig& tc) {
    ContextOptions o;
    o.name = name;
    o.config = tc;
    o.backends.push_back(verbs::create(fabric_.api(), vc));
    Result<std::unique_ptr<Context>> ctx = Context::create(std::move(o));
    EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
    return ctx.ok() ? std::move(ctx).value() : nullptr;
  }

  // alice (a) sends to bob (b).
  void make_pair(const verbs::VerbsConfig& alice, const verbs::VerbsConfig& bob,
                 const TransportConfig& tc = rendezvous_config()) {
    a_ = context("alice", alice, tc);
    b_ = context("bob", bob, tc);
    ASSERT_TRUE(a_ && b_);
    ASSERT_TRUE(connect_pair(*a_, *b_, "verbs://127.0.0.1:0", &ab_, &ba_));
  }

  // One message of `n` bytes a -> b; returns the receive's completion (the send's is in `send`).
  Completion transfer(std::size_t n, std::uint64_t seed, Completion* send = nullptr) {
    Buffer src(n, seed, true), dst(n);
    Recorder rec;
    b_->recv(ba_, seed, dst.region, 0, n, rec.make("recv"));
    a_->send(ab_, seed, src.region, 0, n, 0, rec.make("send"));
    EXPECT_TRUE(rec.wait(2));
    Completion r = rec.find("recv");
    if (send != nullptr) *send = rec.find("send");
    if (r.status.ok()) {
      EXPECT_TRUE(same_bytes(dst.bytes.data(), n, seed)) << n << " bytes";
    }
    return r;
  }

  verbs::fake::FakeFabric fabric_{[] {
    verbs::fake::FabricOptions o;
    o.execution = verbs::fake::Execution::thread;
    o.devices = {verbs::fake::DeviceSpec{"fake_zc0", {verbs::fake::PortSpec{}}}};
    return o;
  }()};
  std::unique_ptr<Context> a_, b_;
  PeerId ab_ = 0, ba_ = 0;
};

TEST_F(VerbsZeroCopy, LargeMessagesLandByteExactThroughPlainWrites) {
  make_pair({}, {});
  const verbs::fake::WriteTraffic before = fabric_.write_traffic();
  const std::size_t n = 4 << 20;
  Completion s;
  Completion r = transfer(n, 1, &s);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_TRUE(s.status.ok()) << s.status.to_string();
  EXPECT_EQ(r.bytes, n);
  const verbs::fake::WriteTraffic t = fabric_.write_traffic();
  // One plain WRITE per 64 KiB chunk, carrying every payload byte; the ring saw only frame
  // headers (ANNOUNCE, READY with the export, one notice per chunk, heartbeats).
  EXPECT_EQ(t.writes - before.writes, n / rendezvous_config().chunk_bytes);
  EXPECT_EQ(t.write_bytes - before.write_bytes, n);
  EXPECT_LT(t.write_with_imm_bytes - before.write_with_imm_bytes, n / 100);
  // Sizes around the chunk and odd lengths, and the connection keeps working for small ones.
  for (std::size_t size : {std::size_t{32} << 10, (std::size_t{64} << 10) + 1, (std::size_t{3} << 20) + 5,
                           std::size_t{100}}) {
    Completion rr = transfer(size, size);
    EXPECT_TRUE(rr.status.ok()) << size << ": " << rr.status.to_string();
  }
}

TEST_F(VerbsZeroCopy, MessagesBelowTheThresholdKeepTheRing) {
  verbs::VerbsConfig c;
  c.zero_copy_min_bytes = 256 << 10;
  make_pair(c, c);
  const verbs::fake::WriteTraffic before = fabric_.write_traffic();
  ASSERT_TRUE(transfer(200 << 10, 2).status.ok());
  verbs::fake::WriteTraffic t = fabric_.write_traffic();
  EXPECT_EQ(t.writes, before.writes) << "a message below the threshold went zero-copy";
  EXPECT_GE(t.write_with_imm_bytes - before.write_with_imm_bytes, std::uint64_t{200} << 10);
  ASSERT_TRUE(transfer(256 << 10, 3).status.ok());
  t = fabric_.write_traffic();
  EXPECT_EQ(t.write_bytes - before.write_bytes, std::uint64_t{256} << 10) << "at the threshold: zero-copy";
}

TEST_F(VerbsZeroCopy, TunableZeroDisablesItOnEitherSide) {
  ASSERT_EQ(setenv("TICTAC_VERBS_ZERO_COPY", "0", 1), 0);
  Result<verbs::VerbsConfig> off = verbs::VerbsConfig::from_env();
  unsetenv("TICTAC_VERBS_ZERO_COPY");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_FALSE(off->zero_copy);
  EXPECT_EQ(off->zero_copy_min_bytes, std::uint64_t{32} << 10);
  ASSERT_EQ(setenv("TICTAC_VERBS_ZERO_COPY_MIN_BYTES", "2G", 1), 0);
  Result<verbs::VerbsConfig> bad = verbs::VerbsConfig::from_env();
  unsetenv("TICTAC_VERBS_ZERO_COPY_MIN_BYTES");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(contains(bad.status().message(), "TICTAC_VERBS_ZERO_COPY_MIN_BYTES")) << bad.status().to_string();

  // The sender refuses the receiver's export: the ring carries the bytes into the exported buffer.
  make_pair(*off, {});
  const verbs::fake::WriteTraffic before = fabric_.write_traffic();
  ASSERT_TRUE(transfer(4 << 20, 4).status.ok());
  // The receiver does not export: nothing to write into.
  Completion r = Completion{};
  {
    Buffer src(1 << 20, 5, true), dst(1 << 20);
    Recorder rec;
    a_->recv(ab_, 5, dst.region, 0, 1 << 20, rec.make("recv"));
    b_->send(ba_, 5, src.region, 0, 1 << 20, 0, rec.make("send"));
    ASSERT_TRUE(rec.wait(2));
    r = rec.find("recv");
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    EXPECT_TRUE(same_bytes(dst.bytes.data(), 1 << 20, 5));
  }
  EXPECT_EQ(fabric_.write_traffic().writes, before.writes) << "TICTAC_VERBS_ZERO_COPY=0 was ignored";
}

// Both requests fail once; the Statuses name the peer and the verbs cause; then the pair is gone
// without leftovers (TearDown checks the fabric).
void expect_write_failure(Context& a, PeerId ab, Context& b, PeerId ba, const std::string& cause) {
  const std::size_t n = 1 << 20;
  Buffer src(n, 6, true), dst(n);
  Recorder rec;
  b.recv(ba, 6, dst.region, 0, n, rec.make("recv"));
  a.send(ab, 6, src.region, 0, n, 0, rec.make("send"));
  ASSERT_TRUE(rec.wait(2));
  const Status s = rec.find("send").status;
  const Status r = rec.find("recv").status;
  ASSERT_FALSE(s.ok());
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(s.message(), "peer 'bob'")) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "zero-copy RDMA WRITE")) << s.to_string();
  EXPECT_TRUE(contains(s.message(), cause)) << s.to_string();
  EXPECT_TRUE(contains(r.message(), "peer 'alice'")) << r.to_string();
  // The receiver learns it from the access-error event on its QP, or from the sender closing.
  EXPECT_TRUE(contains(r.message(), "access") || contains(r.message(), "closed the connection")) << r.to_string();
  // The peer stays failed: later requests complete at once with the terminal status.
  Recorder later;
  a.send(ab, 7, src.region, 0, 10, 0, later.make("send"));
  ASSERT_TRUE(later.wait(1));
  EXPECT_FALSE(later.find("send").status.ok());
  EXPECT_EQ(rec.count(), 2u) << "a request completed twice";
}

TEST_F(VerbsZeroCopy, CorruptedRkeyFailsBothPeersNamingTheCause) {
  make_pair({}, {});
  fabric_.corrupt_next_write_rkey();
  expect_write_failure(*a_, ab_, *b_, ba_, "remote access error");
}

TEST_F(VerbsZeroCopy, RevokedDestinationRegionFailsBothPeersNamingTheCause) {
  make_pair({}, {});
  fabric_.revoke_next_remote_mr();
  expect_write_failure(*a_, ab_, *b_, ba_, "remote access error");
}

TEST_F(VerbsZeroCopy, CancelledReceiveCompletesOnlyOnceTheMessageLanded) {
  TransportConfig tc = rendezvous_config();
  tc.chunk_bytes = 16 << 10;
  tc.window_chunks = 1;
  make_pair({}, {}, tc);
  const std::size_t n = 32 << 20;  // 2048 chunks: the cancel arrives while they are written
  Buffer src(n, 8, true), dst(n);
  Recorder rec;
  const verbs::fake::WriteTraffic before = fabric_.write_traffic();
  const RequestId r = b_->recv(ba_, 8, dst.region, 0, n, rec.make("recv"));
  a_->send(ab_, 8, src.region, 0, n, 0, rec.make("send"));
  const auto give_up = std::chrono::steady_clock::now() + kWait;
  while (fabric_.write_traffic().writes == before.writes && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  b_->cancel(r);
  ASSERT_TRUE(rec.wait_label("recv"));
  const Completion rc = rec.find("recv");
  ASSERT_EQ(rc.status.code(), StatusCode::cancelled) << rc.status.to_string();
  EXPECT_TRUE(contains(rc.status.message(), "zero-copy")) << rc.status.to_string();
  // Completed only after every byte had landed ...
  EXPECT_TRUE(same_bytes(dst.bytes.data(), n, 8));
  // ... and nothing writes into the buffer any more.
  std::fill(dst.bytes.begin(), dst.bytes.end(), std::byte{0});
  ASSERT_TRUE(rec.wait_label("send"));
  EXPECT_TRUE(rec.find("send").status.ok()) << rec.find("send").status.to_string();
  Completion next = transfer(1 << 20, 9);
  EXPECT_TRUE(next.status.ok()) << next.status.to_string();
  EXPECT_TRUE(std::all_of(dst.bytes.begin(), dst.bytes.end(), [](std::byte x) { return x == std::byte{0}; }));
}

}  // namespace
}  // namespace tictac::transport::testing
