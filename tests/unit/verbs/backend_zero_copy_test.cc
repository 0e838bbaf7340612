// Verbs backend, zero-copy at the endpoint level on the fake fabric: exports and their release
// (after the last DATA, after an ABORT), chunks larger than a ring slot written in place, the
// sender's TICTAC_VERBS_ZERO_COPY=0 falling back to the ring into the exported buffer, what
// export_destination() refuses, protocol violations about exports, and the refusal of a peer
// that speaks QpInfo version 1.
#include <gtest/gtest.h>

#include <cstring>

#include "tests/unit/verbs/backend_harness.h"
#include "transport/verbs/backend/slot.h"

namespace tictac::verbs::testing {
namespace {

using transport::wire::FrameType;
using transport::wire::Header;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

VerbsConfig small_ring() {
  VerbsConfig c;
  c.slot_bytes = 4096;
  c.ring_slots = 4;
  c.signal_every = 2;
  return c;
}

Header ready_for(std::uint64_t msg_id) {
  Header h;
  h.type = FrameType::ready;
  h.msg_id = msg_id;
  return h;
}

Header chunk(std::uint64_t msg_id, std::uint64_t offset, std::uint32_t length, std::uint64_t total) {
  Header h = data_header(length, msg_id);
  h.offset = offset;
  h.total = total;
  return h;
}

class BackendZeroCopy : public ::testing::Test {
 protected:
  void TearDown() override {
    pair_.reset();
    rogue_.reset();
    EXPECT_EQ(fabric_.live_objects(), 0u) << "verbs objects left behind";
  }

  BackendPair& connect_pair(VerbsConfig a = small_ring(), VerbsConfig b = small_ring()) {
    pair_ = std::make_unique<BackendPair>(fabric_.api(), a, b);
    EXPECT_TRUE(pair_->connect());
    return *pair_;
  }

  // B exports `dst` for message 1 and sends READY; A has the export afterwards.
  void export_and_ready(BackendPair& p, std::vector<std::byte>& dst) {
    ASSERT_TRUE(p.b.verbs()->export_destination(1, dst.data(), dst.size()));
    EXPECT_EQ(p.b.verbs()->exports_live(), 1u);
    p.b.sink.place_data = dst.data();
    ASSERT_TRUE(p.b.endpoint->post(ready_for(1), nullptr, 100).ok());
    ASSERT_TRUE(p.run_until([&] { return p.a.sink.frames.size() == 1; }));
    EXPECT_EQ(p.a.sink.frames[0].header.type, FrameType::ready);
    EXPECT_EQ(p.a.verbs()->remote_exports_live(), 1u);
  }

  // A sends `src` as message 1 in chunks of `chunk_bytes` (waiting for capacity in between).
  void send_chunks(BackendPair& p, const std::vector<std::byte>& src, std::uint32_t chunk_bytes) {
    for (std::uint64_t off = 0; off < src.size(); off += chunk_bytes) {
      ASSERT_TRUE(p.run_until([&] { return p.a.endpoint->has_capacity(); }));
      const auto len = static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk_bytes, src.size() - off));
      ASSERT_TRUE(p.a.endpoint->post(chunk(1, off, len, src.size()), src.data() + off, off + 1).ok());
    }
  }

  BackendPair& connect_to_rogue() {
    pair_ = std::make_unique<BackendPair>(fabric_.api(), small_ring(), small_ring());
    rogue_ = std::make_unique<RoguePeer>(fabric_.api(), RogueOptions{});
    const Status st = pair_->connect_a_to(rogue_->listen());
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(rogue_->join()) << rogue_->error();
    return *pair_;
  }

  // A slot's header room for `h` with slot kind `kind`, plus `extra` payload bytes.
  static std::vector<std::byte> slot_bytes(const Header& h, SlotKind kind, std::size_t extra = 0) {
    std::vector<std::byte> b(kSlotHeaderRoom + extra);
    const auto enc = transport::wire::encode(h);
    std::memcpy(b.data(), enc.data(), enc.size());
    b[kSlotKindOffset] = std::byte{static_cast<std::uint8_t>(kind)};
    return b;
  }

  fake::FakeFabric fabric_{threaded_fabric()};
  std::unique_ptr<BackendPair> pair_;
  std::unique_ptr<RoguePeer> rogue_;
};

TEST_F(BackendZeroCopy, ChunksLargerThanASlotAreWrittenInPlaceAndTheExportsReleased) {
  for (const bool sender_zero_copy : {true, false}) {
    SCOPED_TRACE(sender_zero_copy ? "sender zero-copy" : "sender TICTAC_VERBS_ZERO_COPY=0");
    VerbsConfig a = small_ring();
    a.zero_copy = sender_zero_copy;
    BackendPair& p = connect_pair(a);
    const std::size_t n = (256 << 10) + 3;
    const std::vector<std::byte> src = bytes_for(n, 3);
    std::vector<std::byte> dst(n);
    export_and_ready(p, dst);
    const fake::WriteTraffic before = fabric_.write_traffic();
    send_chunks(p, src, 64 << 10);  // 16 ring slots' worth per chunk
    ASSERT_TRUE(p.run_until([&] { return p.b.sink.frames.size() == 5 && p.a.sink.sent.size() == 5; }));
    EXPECT_EQ(dst, src);
    EXPECT_EQ(p.b.verbs()->exports_live(), 0u) << "the export outlived its last chunk";
    EXPECT_EQ(p.a.verbs()->remote_exports_live(), 0u);
    const fake::WriteTraffic t = fabric_.write_traffic();
    EXPECT_EQ(t.writes - before.writes, sender_zero_copy ? 5u : 0u);
    EXPECT_EQ(t.write_bytes - before.write_bytes, sender_zero_copy ? n : 0u);
    EXPECT_TRUE(p.a.sink.failures.empty() && p.b.sink.failures.empty());
    pair_.reset();
    EXPECT_EQ(fabric_.live_objects(), 0u);
  }
}

TEST_F(BackendZeroCopy, AbortReleasesTheExportOnBothSides) {
  BackendPair& p = connect_pair();
  const std::vector<std::byte> src = bytes_for(128 << 10, 4);
  std::vector<std::byte> dst(src.size());
  export_and_ready(p, dst);
  ASSERT_TRUE(p.a.endpoint->post(chunk(1, 0, 64 << 10, src.size()), src.data(), 1).ok());
  Header abort;
  abort.type = FrameType::abort;
  abort.msg_id = 1;
  ASSERT_TRUE(p.run_until([&] { return p.a.endpoint->has_capacity(); }));
  ASSERT_TRUE(p.a.endpoint->post(abort, nullptr, 2).ok());
  EXPECT_EQ(p.a.verbs()->remote_exports_live(), 0u);
  ASSERT_TRUE(p.run_until([&] { return p.b.sink.frames.size() == 2; }));
  EXPECT_EQ(p.b.verbs()->exports_live(), 0u);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + (64 << 10), dst.begin()));
}

TEST_F(BackendZeroCopy, ExportIsRefusedBelowTheThresholdAndWhenDisabled) {
  VerbsConfig off = small_ring();
  off.zero_copy = false;
  BackendPair& p = connect_pair(small_ring(), off);
  std::vector<std::byte> buf(1 << 20);
  EXPECT_FALSE(p.a.verbs()->export_destination(1, buf.data(), (32 << 10) - 1)) << "below the 32K default";
  EXPECT_FALSE(p.a.verbs()->export_destination(2, buf.data(), 0));
  EXPECT_TRUE(p.a.verbs()->export_destination(3, buf.data(), 32 << 10));
  EXPECT_FALSE(p.b.verbs()->export_destination(1, buf.data(), buf.size())) << "TICTAC_VERBS_ZERO_COPY=0";
  EXPECT_EQ(p.a.verbs()->exports_live(), 1u);
  EXPECT_EQ(p.b.verbs()->exports_live(), 0u);
  p.a.endpoint->close();
  EXPECT_EQ(p.a.verbs()->exports_live(), 0u) << "close keeps an export";
}

TEST_F(BackendZeroCopy, WrittenNoticeForAMessageNeverExportedIsAProtocolError) {
  BackendPair& p = connect_to_rogue();
  EXPECT_EQ(rogue_->write_fragment(slot_bytes(data_header(1000, 5), SlotKind::written), 0, 0), IBV_WC_SUCCESS);
  ASSERT_TRUE(p.run_until([&] { return !p.a.sink.failures.empty(); }));
  const Status& s = p.a.sink.failures[0];
  EXPECT_EQ(s.code(), StatusCode::protocol_error) << s.to_string();
  EXPECT_TRUE(contains(s.message(), "which we never exported")) << s.message();
  EXPECT_TRUE(p.a.sink.frames.empty());
}

TEST_F(BackendZeroCopy, AnExportThatDoesNotFitTheMessageIsAProtocolError) {
  BackendPair& p = connect_to_rogue();
  std::vector<std::byte> ready = slot_bytes(ready_for(1), SlotKind::ready_export, kExportBytes);
  encode_export(DestinationExport{0x10000, 77, 100}, ready.data() + kSlotHeaderRoom);
  EXPECT_EQ(rogue_->write_fragment(ready, 0, 0), IBV_WC_SUCCESS);
  ASSERT_TRUE(p.run_until([&] { return p.a.sink.frames.size() == 1; }));
  EXPECT_EQ(p.a.verbs()->remote_exports_live(), 1u);
  const std::vector<std::byte> src = bytes_for(64 << 10, 6);
  const Status st = p.a.endpoint->post(chunk(1, 0, 64 << 10, src.size()), src.data(), 1);
  EXPECT_EQ(st.code(), StatusCode::protocol_error) << st.to_string();
  EXPECT_TRUE(contains(st.message(), "exported 100 bytes for message 1 of 65536 bytes")) << st.message();
  EXPECT_TRUE(p.a.verbs()->closed());
  p.run_a_little();
  EXPECT_TRUE(p.a.sink.failures.empty()) << "post() reported the failure; no sink call may follow";
  // A second export for the same message is refused too (fresh peer).
  BackendPair& q = connect_to_rogue();
  EXPECT_EQ(rogue_->write_fragment(ready, 0, 0), IBV_WC_SUCCESS);
  EXPECT_EQ(rogue_->write_fragment(ready, 1, 1), IBV_WC_SUCCESS);
  ASSERT_TRUE(q.run_until([&] { return !q.a.sink.failures.empty(); }));
  EXPECT_TRUE(contains(q.a.sink.failures[0].message(), "a second destination export for message 1"))
      << q.a.sink.failures[0].message();
}

TEST_F(BackendZeroCopy, PeerWithQpInfoVersion1IsRefusedWithTheReason) {
  pair_ = std::make_unique<BackendPair>(fabric_.api(), small_ring(), small_ring());
  RogueOptions old;
  old.qp_info_version = 1;
  rogue_ = std::make_unique<RoguePeer>(fabric_.api(), old);
  const Status st = pair_->connect_a_to(rogue_->listen());
  rogue_->join();
  EXPECT_EQ(st.code(), StatusCode::protocol_error) << st.to_string();
  EXPECT_TRUE(contains(st.message(), "version 1, expected 2")) << st.message();
  EXPECT_TRUE(contains(st.message(), "run the same TicTac release on both sides")) << st.message();
  EXPECT_EQ(pair_->a.endpoint, nullptr);
}

}  // namespace
}  // namespace tictac::verbs::testing
