// ScriptedEndpoint, TestHost and Pair: two Connections (initiator and acceptor) wired through
// two scripted Endpoints, with no sockets and no Core, for connection_scripted_test.cc. The test
// moves every frame (deliver_next / inject), completes every send (complete_sends) and runs the
// pumps itself as Core::pump does, so each step of the protocol can be asserted frame by frame.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "transport/backend.h"
#include "transport/config.h"
#include "transport/connection.h"
#include "transport/request.h"
#include "transport/send_queue.h"
#include "transport/wire.h"

namespace tictac::transport::scripted {

using wire::FrameType;
using wire::Header;
using Sigs = std::vector<std::string>;

constexpr std::size_t kUnlimited = std::numeric_limits<std::size_t>::max();
constexpr std::byte kUntouched{0xEE};  // a receive buffer's fill before anything lands

// "DATA m1 o65536 l65536 p0": type, msg id, flags, offset (DATA), length, priority, credit.
inline std::string sig(const Header& h) {
  std::string s(wire::to_string(h.type));
  if (h.type == FrameType::auth || h.type == FrameType::hello) return s;
  if (h.msg_id != 0) s += " m" + std::to_string(h.msg_id);
  if ((h.flags & wire::kFlagEager) != 0) s += " eager";
  if ((h.flags & wire::kFlagClaimed) != 0) s += " claimed";
  if ((h.flags & wire::kFlagInline) != 0) s += " inline";
  if (h.type == FrameType::data) s += " o" + std::to_string(h.offset);
  if (h.length != 0) s += " l" + std::to_string(h.length);
  if (h.type == FrameType::announce || h.type == FrameType::data) {
    s += " p" + std::to_string(h.priority);
  }
  if ((h.flags & wire::kFlagCredit) != 0) s += " credit" + std::to_string(h.aux);
  return s;
}

inline std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> b(n);
  for (std::size_t k = 0; k < n; ++k) b[k] = std::byte((k * 7 + k / 251 + seed * 31) & 0xff);
  return b;
}

struct Frame {
  Header h;  // as decoded from its wire encoding
  std::vector<std::byte> payload;
  std::uint64_t cookie = 0;
};

// An Endpoint whose wire is the test: post() records the frame, the test decides when it is
// sent (on_sent), delivered to the peer (deliver) or lost (fail). Follows the backend.h contract:
// no sink call from inside post() (post() only records), none after close().
class ScriptedEndpoint final : public Endpoint {
 public:
  explicit ScriptedEndpoint(std::string name) : name_(std::move(name)) {}

  void start(EndpointSink* sink) override { sink_ = sink; }
  bool has_capacity() const override {
    const bool room = !closed_ && unsent_.size() < capacity_;
    if (!room) said_full_ = true;
    return room;
  }
  Status post(const Header& h, const std::byte* payload, std::uint64_t cookie) override {
    EXPECT_FALSE(closed_) << name_ << ": post() after close()";
    if (!has_capacity()) return Status(StatusCode::resource_exhausted, name_ + " is full");
    Result<Header> decoded = wire::decode(wire::encode(h));
    EXPECT_TRUE(decoded.ok()) << name_
                              << " got a frame the wire refuses: " << decoded.status().to_string();
    Frame f{decoded.ok() ? *decoded : h, {}, cookie};
    if (h.length > 0) f.payload.assign(payload, payload + h.length);
    outbox.push_back(std::move(f));
    unsent_.push_back(cookie);
    return Status::Ok();
  }
  void close() override {
    ++close_calls;
    closed_ = true;
  }
  std::string describe() const override { return "scripted " + name_; }

  // Frames posted and not yet completed may number `n` (kUnlimited by default); on_writable()
  // follows when room appears after has_capacity() said no.
  void set_capacity(std::size_t n) {
    capacity_ = n;
    writable_if_room();
  }
  // The oldest `n` posted frames left the host.
  void complete_sends(std::size_t n = kUnlimited) {
    for (; n > 0 && !unsent_.empty() && !closed_; --n) {
      const std::uint64_t cookie = unsent_.front();
      unsent_.pop_front();
      sink_->on_sent(cookie);
    }
    writable_if_room();
  }
  // One incoming frame, as a backend delivers it: on_header, the payload copied to the
  // Destination, on_frame. An on_header error closes the endpoint and is reported with
  // on_failed (the contract); it is also returned.
  Status deliver(const Header& h, std::span<const std::byte> payload) {
    EXPECT_FALSE(closed_) << name_ << ": delivery after close()";
    EXPECT_EQ(payload.size(), h.length);
    Result<Destination> d = sink_->on_header(h);
    if (!d.ok()) {
      const Status st = d.status();
      closed_ = true;
      sink_->on_failed(st);
      return st;
    }
    if (!d->discard && h.length > 0) {
      if (d->data == nullptr) {
        ADD_FAILURE() << name_ << ": no destination for " << sig(h);
      } else {
        std::memcpy(d->data, payload.data(), std::min<std::size_t>(payload.size(), h.length));
      }
    }
    sink_->on_frame(h);
    return Status::Ok();
  }
  // The connection broke (terminal).
  void fail(const Status& st) {
    closed_ = true;
    sink_->on_failed(st);
  }
  bool closed() const { return closed_; }
  std::size_t unsent() const { return unsent_.size(); }

  std::vector<Frame> outbox;
  int close_calls = 0;

 private:
  void writable_if_room() {
    if (said_full_ && !closed_ && unsent_.size() < capacity_) {
      said_full_ = false;
      sink_->on_writable();
    }
  }

  std::string name_;
  EndpointSink* sink_ = nullptr;
  std::size_t capacity_ = kUnlimited;
  std::deque<std::uint64_t> unsent_;
  bool closed_ = false;
  mutable bool said_full_ = false;
};

// The Core's side of a Connection, reduced to records and a FIFO matcher by tag.
class TestHost final : public ConnectionHost {
 public:
  struct Unexpected {
    Tag tag;
    std::uint64_t msg_id;
  };
  struct Kept {
    std::uint64_t msg_id;
    Tag tag;
    std::uint64_t total;
    std::unique_ptr<std::byte[]> bytes;
  };

  Request* match_message(Connection&, Tag tag, std::uint64_t msg_id) override {
    auto it =
        std::find_if(posted.begin(), posted.end(), [&](Request* r) { return r->tag() == tag; });
    if (it == posted.end()) {
      unexpected.push_back({tag, msg_id});
      return nullptr;
    }
    Request* r = *it;
    posted.erase(it);
    return r;
  }
  void forget_message(Connection&, std::uint64_t msg_id) override {
    forgotten.push_back(msg_id);
    std::erase_if(unexpected, [&](const Unexpected& u) { return u.msg_id == msg_id; });
  }
  void finish(Request* req, const Status& status, std::uint64_t bytes, PeerId source) override {
    events.push_back("finish");
    req->complete(status, bytes, source);
  }
  void connection_established(Connection&) override {
    events.push_back("established");
    ++established;
  }
  void keep_arrived(Connection&, std::uint64_t msg_id, Tag tag, std::uint64_t total,
                    std::unique_ptr<std::byte[]> bytes) override {
    events.push_back("keep m" + std::to_string(msg_id));
    kept.push_back({msg_id, tag, total, std::move(bytes)});
  }
  void connection_failed(Connection&, const Status& status) override {
    events.push_back("failed");
    failures.push_back(status);
  }
  void schedule_pump(SendQueue&) override { pump_due = true; }
  std::size_t unexpected_count(const Connection&) const override { return unexpected.size(); }
  bool on_loop_thread() const override { return true; }

  std::vector<Request*> posted;  // receives waiting for a message, in posting order
  std::vector<Unexpected> unexpected;
  std::vector<std::uint64_t> forgotten;
  std::vector<Kept> kept;
  std::vector<Status> failures;
  std::vector<std::string> events;
  int established = 0;
  bool pump_due = false;
};

// A request the test owns, with what its callback reported.
struct Op {
  std::vector<std::byte> buf;
  std::unique_ptr<Request> req;
  int completions = 0;
  Status status;
  std::uint64_t bytes = 0;
  PeerId source = kNoPeer;
  bool done() const { return completions > 0; }
};

struct Side {
  Side(PeerId id, const std::string& name, bool initiator, const TransportConfig& cfg)
      : queue(SendQueueConfig{cfg.chunk_bytes, cfg.window_chunks, cfg.enforce_priority}) {
    // The queue keeps the defaults' starting chunk (64 KiB) and window (2) fixed: the tuner
    // would resize them by wall-clock rate, and frame sequences must not depend on timing.
    auto owned = std::make_unique<ScriptedEndpoint>(name);
    ep = owned.get();
    conn = std::make_unique<Connection>(id, std::move(owned), queue, host, cfg,
                                        HelloInfo{name, cfg.eager_bytes}, initiator);
  }
  // What Core::pump does for one device.
  void pump() {
    host.pump_due = false;
    auto can_send = [this](PeerId p) { return p == conn->id() && conn->has_capacity(); };
    while (std::optional<Chunk> c = queue.pop(can_send)) conn->post_chunk(*c);
  }
  Sigs sigs(std::size_t from = 0) const {
    Sigs out;
    for (std::size_t k = from; k < ep->outbox.size(); ++k) out.push_back(sig(ep->outbox[k].h));
    return out;
  }
  std::size_t mark() const { return ep->outbox.size(); }

  TestHost host;
  SendQueue queue;
  ScriptedEndpoint* ep = nullptr;  // owned by conn
  std::unique_ptr<Connection> conn;
  std::size_t delivered = 0;  // frames of ep->outbox handed to the peer
};

class Pair {
 public:
  const TransportConfig cfg = TransportConfig::defaults();
  std::deque<std::unique_ptr<Op>> ops;  // declared first: outlive the connections
  Side i{1, "initiator", true, cfg};
  Side a{2, "acceptor", false, cfg};

  Side& peer(const Side& s) { return &s == &i ? a : i; }
  void start() {
    i.conn->start(std::nullopt);
    a.conn->start(std::nullopt);
  }
  void handshake() {
    start();
    settle();
    ASSERT_EQ(i.conn->state(), Connection::State::established);
    ASSERT_EQ(a.conn->state(), Connection::State::established);
  }
  // The next frame `from` posted reaches its peer.
  Status deliver_next(Side& from) {
    const Frame& f = from.ep->outbox.at(from.delivered++);
    return peer(from).ep->deliver(f.h, f.payload);
  }
  Status inject(Side& to, const Header& h, std::span<const std::byte> payload = {}) {
    return to.ep->deliver(h, payload);
  }
  // One round: due pumps, one frame each way, every posted frame completed.
  bool step() {
    bool moved = false;
    for (Side* s : {&i, &a}) {
      if (s->host.pump_due) {
        s->pump();
        moved = true;
      }
    }
    for (Side* s : {&i, &a}) {
      if (s->delivered < s->ep->outbox.size() && !s->ep->closed() && !peer(*s).ep->closed()) {
        (void)deliver_next(*s);
        moved = true;
      }
    }
    for (Side* s : {&i, &a}) {
      if (s->ep->unsent() > 0 && !s->ep->closed()) {
        s->ep->complete_sends();
        moved = true;
      }
    }
    return moved;
  }
  void settle() {
    for (int n = 0; step(); ++n) ASSERT_LT(n, 100000) << "no quiescence";
  }

  Op& op(RequestKind kind, PeerId peer, Tag tag, std::vector<std::byte> buf, Priority prio) {
    ops.push_back(std::make_unique<Op>());
    Op* o = ops.back().get();
    o->buf = std::move(buf);
    o->req =
        std::make_unique<Request>(ops.size(), kind, peer, tag, o->buf.data(), o->buf.size(), prio,
                                  [o](const Status& st, std::uint64_t bytes, PeerId source) {
                                    ++o->completions;
                                    o->status = st;
                                    o->bytes = bytes;
                                    o->source = source;
                                  });
    return *o;
  }
  Op& send(Side& s, Tag tag, std::size_t size, Priority prio, int seed) {
    Op& o = op(RequestKind::send, s.conn->id(), tag, pattern(size, seed), prio);
    s.conn->send(o.req.get());
    return o;
  }
  // Posts a receive: binds the oldest unexpected message with its tag, else waits (no advert).
  Op& recv(Side& s, Tag tag, std::size_t size) {
    Op& o = op(RequestKind::recv, s.conn->id(), tag, std::vector<std::byte>(size, kUntouched), 0);
    auto& un = s.host.unexpected;
    auto it = std::find_if(un.begin(), un.end(), [&](const auto& u) { return u.tag == tag; });
    if (it == un.end()) {
      s.host.posted.push_back(o.req.get());
    } else {
      const std::uint64_t msg_id = it->msg_id;
      un.erase(it);
      s.conn->bind(msg_id, o.req.get());
    }
    return o;
  }
};

}  // namespace tictac::transport::scripted
