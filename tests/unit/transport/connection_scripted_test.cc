// Connection against a scripted Endpoint (scripted_connection.h): no sockets, no Core. Each
// step of the protocol in transport/connection.h (handshake, inline/eager/rendezvous sends,
// priority order, cancel and ABORT, malformed frames, endpoint failure, keep_arrived) is asserted
// frame by frame, with the requests' outcomes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/transport/scripted_connection.h"

namespace tictac::transport {
namespace {

using scripted::Frame;
using scripted::kUnlimited;
using scripted::kUntouched;
using scripted::Op;
using scripted::Pair;
using scripted::Side;
using scripted::Sigs;
using scripted::TestHost;
using wire::FrameType;
using wire::Header;

constexpr std::uint64_t kLarge = 300 << 10;  // > TICTAC_EAGER_BYTES (256 KiB): rendezvous

// The receive holds exactly the sent bytes, and nothing landed past them.
void expect_received(const Op& r, const Op& s, PeerId source) {
  ASSERT_EQ(r.completions, 1);
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.bytes, s.buf.size());
  EXPECT_EQ(r.source, source);
  ASSERT_GE(r.buf.size(), s.buf.size());
  EXPECT_TRUE(std::equal(s.buf.begin(), s.buf.end(), r.buf.begin())) << "payload differs";
  EXPECT_TRUE(std::all_of(r.buf.begin() + static_cast<std::ptrdiff_t>(s.buf.size()), r.buf.end(),
                          [](std::byte b) { return b == kUntouched; }));
}

void expect_status(const Op& o, StatusCode code, std::uint64_t bytes = 0) {
  EXPECT_EQ(o.completions, 1);
  EXPECT_EQ(o.status.code(), code) << o.status.to_string();
  EXPECT_EQ(o.bytes, bytes);
}

bool untouched(const Op& r) {
  return std::all_of(r.buf.begin(), r.buf.end(), [](std::byte b) { return b == kUntouched; });
}

Header frame(FrameType type, std::uint64_t msg_id, Tag tag, std::uint64_t total,
             std::uint8_t flags = 0) {
  Header h;
  h.type = type;
  h.msg_id = msg_id;
  h.tag = tag;
  h.total = total;
  h.flags = flags;
  return h;
}

TEST(ConnectionScripted, HandshakeEstablishesBothSides) {
  Pair p;
  p.start();
  p.i.pump();
  p.a.pump();
  EXPECT_EQ(p.i.sigs(), Sigs{"AUTH"});  // the initiator's hello; the acceptor waits for it
  EXPECT_EQ(p.i.ep->outbox[0].h.version, wire::kHandshakeFrameVersion);
  EXPECT_EQ(p.a.sigs(), Sigs{});
  ASSERT_TRUE(p.deliver_next(p.i).ok());
  p.a.pump();
  EXPECT_EQ(p.a.sigs(), (Sigs{"AUTH", "HELLO"}));  // its side of the exchange is done
  EXPECT_EQ(p.a.conn->state(), Connection::State::handshaking);
  p.settle();
  EXPECT_EQ(p.i.sigs(), (Sigs{"AUTH", "HELLO"}));
  for (Side* s : {&p.i, &p.a}) {
    EXPECT_EQ(s->conn->state(), Connection::State::established);
    EXPECT_EQ(s->host.established, 1);
    EXPECT_TRUE(s->host.failures.empty());
  }
  EXPECT_EQ(p.i.conn->peer_name(), "acceptor");
  EXPECT_EQ(p.a.conn->peer_name(), "initiator");
}

TEST(ConnectionScripted, HandshakeRefusesOtherFramesFirst) {
  // Before any AUTH: an ANNOUNCE is a protocol_error, not an unexpected message.
  Pair p;
  p.start();
  Status st = p.inject(p.a, frame(FrameType::announce, 1, 5, 10, wire::kFlagEager));
  EXPECT_EQ(st.code(), StatusCode::protocol_error);
  EXPECT_NE(st.message().find("expected AUTH first, got ANNOUNCE"), std::string::npos)
      << st.message();
  EXPECT_EQ(p.a.conn->state(), Connection::State::failed);
  EXPECT_EQ(p.a.host.established, 0);
  EXPECT_TRUE(p.a.host.unexpected.empty());
  ASSERT_EQ(p.a.host.failures.size(), 1u);
  EXPECT_EQ(p.a.host.failures[0].code(), StatusCode::protocol_error);
  EXPECT_EQ(p.a.ep->close_calls, 1);
  p.a.pump();
  EXPECT_EQ(p.a.sigs(), Sigs{});  // no AUTH answer, nothing at all after the failure

  // Authenticated but before the peer's HELLO: only HELLO.
  Pair q;
  q.start();
  q.i.pump();
  ASSERT_TRUE(q.deliver_next(q.i).ok());
  st = q.inject(q.a, frame(FrameType::heartbeat, 0, 0, 0));
  EXPECT_EQ(st.code(), StatusCode::protocol_error);
  EXPECT_NE(st.message().find("expected HELLO, got HEARTBEAT"), std::string::npos) << st.message();
  EXPECT_EQ(q.a.conn->state(), Connection::State::failed);
  EXPECT_EQ(q.a.host.established, 0);
  EXPECT_EQ(q.a.host.failures.size(), 1u);
}

TEST(ConnectionScripted, SmallEagerSendIsOneInlineFrame) {
  Pair p;
  p.handshake();
  const std::size_t mi = p.i.mark(), ma = p.a.mark();
  Op& r = p.recv(p.a, 7, 4096);
  Op& s = p.send(p.i, 7, 1000, 0, 1);
  p.i.pump();
  ASSERT_EQ(p.i.sigs(mi), Sigs{"ANNOUNCE m1 eager inline l1000 p0"});
  EXPECT_EQ(p.i.ep->outbox[mi].h.total, 1000u);
  EXPECT_EQ(p.i.ep->outbox[mi].h.tag, 7u);
  EXPECT_EQ(p.i.ep->outbox[mi].payload, s.buf);
  EXPECT_EQ(s.req->state(), RequestState::posted);
  ASSERT_TRUE(p.deliver_next(p.i).ok());
  expect_received(r, s, 2);
  EXPECT_FALSE(s.done());  // delivered, but the endpoint has not reported it sent
  p.a.pump();
  EXPECT_EQ(p.a.sigs(ma), Sigs{});  // no READY, and the credit waits for a frame to ride on
  p.i.ep->complete_sends();
  expect_status(s, StatusCode::ok, 1000);
  EXPECT_EQ(s.source, 1u);
  p.settle();
  EXPECT_EQ(p.i.sigs(mi).size(), 1u);
}

TEST(ConnectionScripted, LargeSendWaitsForReady) {
  Pair p;
  p.handshake();
  const std::size_t mi = p.i.mark(), ma = p.a.mark();
  Op& r = p.recv(p.a, 9, kLarge);
  Op& s = p.send(p.i, 9, kLarge, 0, 2);
  p.i.pump();
  ASSERT_EQ(p.i.sigs(mi), Sigs{"ANNOUNCE m1 p0"});  // rendezvous: no data yet
  EXPECT_EQ(p.i.ep->outbox[mi].h.total, kLarge);
  ASSERT_TRUE(p.deliver_next(p.i).ok());
  p.i.pump();
  EXPECT_EQ(p.i.sigs(mi).size(), 1u);
  p.a.pump();
  EXPECT_EQ(p.a.sigs(ma), Sigs{"READY m1"});
  EXPECT_EQ(r.req->state(), RequestState::posted);
  p.settle();
  EXPECT_EQ(p.i.sigs(mi), (Sigs{"ANNOUNCE m1 p0", "DATA m1 o0 l65536 p0",
                                "DATA m1 o65536 l65536 p0", "DATA m1 o131072 l65536 p0",
                                "DATA m1 o196608 l65536 p0", "DATA m1 o262144 l45056 p0"}));
  expect_received(r, s, 2);
  expect_status(s, StatusCode::ok, kLarge);
}

TEST(ConnectionScripted, LargeSendToALaterReceive) {
  Pair p;
  p.handshake();
  // A small message first: its eager credit comes back on the READY below.
  Op& r0 = p.recv(p.a, 5, 1000);
  Op& s0 = p.send(p.i, 5, 1000, 0, 3);
  p.settle();
  expect_received(r0, s0, 2);
  const std::size_t mi = p.i.mark(), ma = p.a.mark();
  Op& s = p.send(p.i, 9, kLarge, 0, 4);
  p.settle();
  EXPECT_EQ(p.i.sigs(mi), Sigs{"ANNOUNCE m2 p0"});
  EXPECT_EQ(p.a.sigs(ma), Sigs{});
  ASSERT_EQ(p.a.host.unexpected.size(), 1u);
  EXPECT_EQ(p.a.host.unexpected[0].msg_id, 2u);
  EXPECT_FALSE(s.done());
  Op& r = p.recv(p.a, 9, kLarge + 100);  // binds the announced message
  p.settle();
  EXPECT_EQ(p.a.sigs(ma), Sigs{"READY m2 credit1000"});
  EXPECT_EQ(p.i.sigs(mi).size(), 6u);  // ANNOUNCE + 5 DATA
  expect_received(r, s, 2);
  expect_status(s, StatusCode::ok, kLarge);
  EXPECT_TRUE(p.a.host.unexpected.empty());
}

TEST(ConnectionScripted, EagerSendAboveOneChunkSkipsReady) {
  Pair p;
  p.handshake();
  const std::size_t mi = p.i.mark(), ma = p.a.mark();
  Op& s = p.send(p.i, 4, 100 << 10, 0, 5);  // <= eager credit, > one 64 KiB chunk
  p.settle();
  EXPECT_EQ(p.i.sigs(mi),
            (Sigs{"ANNOUNCE m1 eager p0", "DATA m1 o0 l65536 p0", "DATA m1 o65536 l36864 p0"}));
  EXPECT_EQ(p.a.sigs(ma), Sigs{});
  expect_status(s, StatusCode::ok, 100 << 10);  // left the host: done, received or not
  EXPECT_EQ(p.a.host.unexpected.size(), 1u);    // landed in the eager pool
  Op& r = p.recv(p.a, 4, 100 << 10);
  expect_received(r, s, 2);  // copied out of the pool at once
}

// Three 1000-byte sends queued while the endpoint is full, then capacity returns.
Sigs sends_after_capacity(const std::vector<Priority>& prios) {
  Pair p;
  p.handshake();
  const std::size_t mi = p.i.mark();
  p.i.ep->set_capacity(0);
  std::vector<std::pair<Op*, Op*>> msgs;
  for (std::size_t k = 0; k < prios.size(); ++k) {
    Op& r = p.recv(p.a, k + 1, 1000);
    msgs.emplace_back(&p.send(p.i, k + 1, 1000, prios[k], static_cast<int>(k)), &r);
  }
  p.i.pump();
  EXPECT_EQ(p.i.mark(), mi);  // nothing while full
  p.i.ep->set_capacity(kUnlimited);
  EXPECT_TRUE(p.i.host.pump_due);  // on_writable
  p.settle();
  for (auto [s, r] : msgs) {
    expect_received(*r, *s, 2);
    expect_status(*s, StatusCode::ok, 1000);
  }
  return p.i.sigs(mi);
}

TEST(ConnectionScripted, HigherPriorityLeavesFirst) {
  // Smaller Priority first. Message 2 is more urgent than the inline-pending message 1, so
  // message 1's ANNOUNCE moves to the control lane (ANNOUNCEs stay in id order) and its data
  // follows as a DATA frame in its own, last, level.
  EXPECT_EQ(sends_after_capacity({3, 1, 2}),
            (Sigs{"ANNOUNCE m1 eager p3", "ANNOUNCE m2 eager inline l1000 p1",
                  "ANNOUNCE m3 eager inline l1000 p2", "DATA m1 o0 l1000 p3"}));
}

TEST(ConnectionScripted, SamePriorityLeavesInPostingOrder) {
  EXPECT_EQ(sends_after_capacity({2, 2, 2}),
            (Sigs{"ANNOUNCE m1 eager inline l1000 p2", "ANNOUNCE m2 eager inline l1000 p2",
                  "ANNOUNCE m3 eager inline l1000 p2"}));
}

TEST(ConnectionScripted, CancelQueuedInlineSendIsAnnouncedThenAborted) {
  Pair p;
  p.handshake();
  const std::size_t mi = p.i.mark();
  Op& s1 = p.send(p.i, 5, 1000, 0, 6);
  EXPECT_TRUE(p.i.conn->cancel(s1.req.get()));
  expect_status(s1, StatusCode::cancelled);  // nothing was handed over: completes at once
  p.settle();
  // The receiver counts every message id, so even an unsent one is announced and aborted; its
  // data never leaves.
  EXPECT_EQ(p.i.sigs(mi), (Sigs{"ANNOUNCE m1 eager p0", "ABORT m1"}));
  EXPECT_EQ(p.a.host.forgotten, std::vector<std::uint64_t>{1});
  EXPECT_TRUE(p.a.host.unexpected.empty());
  Op& r = p.recv(p.a, 5, 1000);  // the aborted message does not match it
  EXPECT_FALSE(r.done());
  Op& s2 = p.send(p.i, 5, 1000, 0, 7);
  p.settle();
  expect_received(r, s2, 2);
  EXPECT_EQ(p.i.sigs(mi + 2), Sigs{"ANNOUNCE m2 eager inline l1000 p0"});
}

TEST(ConnectionScripted, CancelAnnouncedSendAborts) {
  Pair p;
  p.handshake();
  const std::size_t mi = p.i.mark(), ma = p.a.mark();
  // Unexpected at the receiver: the ABORT makes it forget the message.
  Op& s1 = p.send(p.i, 6, kLarge, 0, 8);
  p.settle();
  ASSERT_EQ(p.a.host.unexpected.size(), 1u);
  EXPECT_TRUE(p.i.conn->cancel(s1.req.get()));
  expect_status(s1, StatusCode::cancelled);
  p.settle();
  EXPECT_EQ(p.a.host.forgotten, std::vector<std::uint64_t>{1});
  EXPECT_TRUE(p.a.host.unexpected.empty());
  // Bound at the receiver, cancelled while its READY is on the way: the READY is ignored, no
  // DATA leaves, and the receive completes as cancelled by the sender.
  Op& r = p.recv(p.a, 8, kLarge);
  Op& s2 = p.send(p.i, 8, kLarge, 0, 9);
  p.i.pump();
  ASSERT_TRUE(p.deliver_next(p.i).ok());  // ANNOUNCE m2
  p.a.pump();
  EXPECT_EQ(p.a.sigs(ma), Sigs{"READY m2"});
  EXPECT_TRUE(p.i.conn->cancel(s2.req.get()));
  expect_status(s2, StatusCode::cancelled);
  p.settle();
  EXPECT_EQ(p.i.sigs(mi), (Sigs{"ANNOUNCE m1 p0", "ABORT m1", "ANNOUNCE m2 p0", "ABORT m2"}));
  expect_status(r, StatusCode::cancelled);
  EXPECT_TRUE(untouched(r));
  EXPECT_TRUE(p.i.host.failures.empty());
  EXPECT_TRUE(p.a.host.failures.empty());
}

TEST(ConnectionScripted, CancelWithChunksInFlightWaitsForOnSent) {
  Pair p;
  p.handshake();
  const std::size_t mi = p.i.mark();
  Op& r = p.recv(p.a, 8, kLarge);
  Op& s = p.send(p.i, 8, kLarge, 0, 18);
  p.i.pump();
  ASSERT_TRUE(p.deliver_next(p.i).ok());  // ANNOUNCE
  p.a.pump();
  ASSERT_TRUE(p.deliver_next(p.a).ok());  // READY
  p.i.pump();                             // two DATA chunks handed over (window 2)
  ASSERT_EQ(p.i.sigs(mi).size(), 3u);
  EXPECT_TRUE(p.i.conn->cancel(s.req.get()));
  EXPECT_FALSE(s.done());  // the endpoint still holds its buffer
  p.i.ep->complete_sends(1);
  EXPECT_FALSE(s.done());
  p.i.ep->complete_sends();
  expect_status(s, StatusCode::cancelled);
  p.settle();
  EXPECT_EQ(p.i.sigs(mi), (Sigs{"ANNOUNCE m1 p0", "DATA m1 o0 l65536 p0",
                                "DATA m1 o65536 l65536 p0", "ABORT m1"}));
  expect_status(r, StatusCode::cancelled);  // the chunks landed, then the ABORT
  EXPECT_TRUE(p.a.host.failures.empty());
}

TEST(ConnectionScripted, MalformedDataIsAProtocolError) {
  struct Case {
    const char* name;
    bool announce;     // message 1 (tag 7, 100 bytes, rendezvous) announced first
    bool recv_posted;  // a receive for tag 7 waits (it binds message 1)
    Header data;
    const char* error;
  };
  Header unknown = frame(FrameType::data, 99, 7, 100);
  Header skips = frame(FrameType::data, 1, 7, 100);
  skips.offset = 64;
  Header beyond = frame(FrameType::data, 1, 7, 100);
  beyond.length = 200;  // a frame the wire decoder would refuse too
  Header total = frame(FrameType::data, 1, 7, 50);
  Header early = frame(FrameType::data, 1, 7, 100);
  const Case cases[] = {
      {"unknown id", false, true, unknown, "DATA for unknown message 99"},
      {"offset skips", true, true, skips, "expects its next chunk at offset 0"},
      {"past the end", true, true, beyond, "goes beyond the posted buffer"},
      {"other total", true, true, total, "disagrees with its ANNOUNCE"},
      {"before READY", true, false, early, "before READY"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Pair p;
    p.handshake();
    Op* r = c.recv_posted ? &p.recv(p.a, 7, 100) : nullptr;
    if (c.announce) {
      ASSERT_TRUE(p.inject(p.a, frame(FrameType::announce, 1, 7, 100)).ok());
      EXPECT_EQ(r != nullptr, p.a.host.unexpected.empty());
    }
    Header h = c.data;
    if (h.length == 0) h.length = static_cast<std::uint32_t>(std::min<std::uint64_t>(36, h.total));
    const std::vector<std::byte> payload(h.length, std::byte{0x42});
    const Status st = p.inject(p.a, h, payload);
    EXPECT_EQ(st.code(), StatusCode::protocol_error);
    EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
    EXPECT_EQ(p.a.conn->state(), Connection::State::failed);
    ASSERT_EQ(p.a.host.failures.size(), 1u);
    EXPECT_EQ(p.a.host.failures[0].code(), StatusCode::protocol_error);
    if (r != nullptr) {
      EXPECT_TRUE(untouched(*r));  // nothing landed
      // A receive bound to the connection's message fails with it; one still only posted at
      // the host is the host's to fail (Core::connection_failed).
      if (c.announce) {
        expect_status(*r, StatusCode::protocol_error);
      } else {
        EXPECT_FALSE(r->done());
      }
    }
  }
}

TEST(ConnectionScripted, EndpointFailureMidMessageFailsEverything) {
  Pair p;
  p.handshake();
  Op& r = p.recv(p.a, 9, kLarge);
  Op& s = p.send(p.i, 9, kLarge, 0, 10);
  p.i.pump();
  ASSERT_TRUE(p.deliver_next(p.i).ok());  // ANNOUNCE: binds r
  p.a.pump();
  ASSERT_TRUE(p.deliver_next(p.a).ok());  // READY
  p.i.pump();
  ASSERT_EQ(p.i.sigs(p.i.delivered).at(0), "DATA m1 o0 l65536 p0");
  ASSERT_TRUE(p.deliver_next(p.i).ok());  // one chunk landed
  // The acceptor's own sends, stuck behind a full endpoint: one inline, one rendezvous.
  p.a.ep->set_capacity(0);
  Op& a1 = p.send(p.a, 1, 100, 0, 11);
  Op& a2 = p.send(p.a, 2, kLarge, 0, 12);
  p.a.pump();
  EXPECT_FALSE(r.done() || a1.done() || a2.done());

  p.a.ep->fail(Status(StatusCode::connection_lost, "cable cut"));
  expect_status(r, StatusCode::connection_lost);
  expect_status(a1, StatusCode::connection_lost);
  expect_status(a2, StatusCode::connection_lost);
  EXPECT_TRUE(
      std::all_of(r.buf.begin() + 65536, r.buf.end(), [](std::byte b) { return b == kUntouched; }));
  ASSERT_EQ(p.a.host.failures.size(), 1u);
  EXPECT_EQ(p.a.host.failures[0].code(), StatusCode::connection_lost);
  EXPECT_EQ(p.a.conn->state(), Connection::State::failed);
  EXPECT_EQ(p.a.conn->terminal_status().code(), StatusCode::connection_lost);
  EXPECT_EQ(p.a.ep->close_calls, 1);
  p.a.conn->fail(Status(StatusCode::internal, "again"));  // terminal: no second report
  EXPECT_EQ(p.a.host.failures.size(), 1u);
  Op& a3 = p.send(p.a, 3, 10, 0, 13);  // a send after the failure completes at once
  expect_status(a3, StatusCode::connection_lost);

  EXPECT_FALSE(s.done());  // the sender's side learns only from its own endpoint
  p.i.ep->fail(Status(StatusCode::connection_lost, "cable cut"));
  expect_status(s, StatusCode::connection_lost);
  EXPECT_EQ(p.i.host.failures.size(), 1u);
}

TEST(ConnectionScripted, ArrivedUnexpectedMessagesAreKeptOnFailure) {
  Pair p;
  p.handshake();
  Op& whole = p.send(p.i, 1, 1000, 0, 14);  // inline, arrives whole
  p.i.pump();
  p.send(p.i, 2, 0, 0, 15);          // 0 bytes: its ANNOUNCE is all of it
  p.send(p.i, 3, 100 << 10, 0, 16);  // eager, two chunks: only the first arrives
  p.send(p.i, 4, kLarge, 0, 17);     // rendezvous: announced, never READY
  p.i.pump();
  for (;;) {
    const Frame& f = p.i.ep->outbox.at(p.i.delivered);
    ASSERT_TRUE(p.deliver_next(p.i).ok());
    if (f.h.type == FrameType::data && f.h.msg_id == 3) break;
  }
  EXPECT_EQ(p.a.host.unexpected.size(), 4u);
  p.a.ep->fail(Status(StatusCode::connection_lost, "gone"));
  std::sort(p.a.host.kept.begin(), p.a.host.kept.end(),
            [](const auto& x, const auto& y) { return x.msg_id < y.msg_id; });
  ASSERT_EQ(p.a.host.kept.size(), 2u);
  const TestHost::Kept& k1 = p.a.host.kept[0];
  EXPECT_EQ(k1.msg_id, 1u);
  EXPECT_EQ(k1.tag, 1u);
  ASSERT_EQ(k1.total, 1000u);
  ASSERT_NE(k1.bytes, nullptr);
  EXPECT_TRUE(std::equal(whole.buf.begin(), whole.buf.end(), k1.bytes.get()));
  EXPECT_EQ(p.a.host.kept[1].msg_id, 2u);
  EXPECT_EQ(p.a.host.kept[1].total, 0u);
  EXPECT_EQ(p.a.host.kept[1].bytes, nullptr);  // "bytes null when total is 0"
  // keep_arrived comes before connection_failed, which comes once.
  const std::vector<std::string>& ev = p.a.host.events;
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.end()[-3].rfind("keep m", 0), 0u);
  EXPECT_EQ(ev.end()[-2].rfind("keep m", 0), 0u);
  EXPECT_EQ(ev.back(), "failed");
  EXPECT_EQ(std::count(ev.begin(), ev.end(), "failed"), 1);
}

}  // namespace
}  // namespace tictac::transport
