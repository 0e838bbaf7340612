// Connection: the core's per-peer protocol over one Endpoint (internal to transport/).
//
// Implements the message protocol on top of frames (see docs/transport.md):
//   sender:   ANNOUNCE (control lane, FIFO) -> [claimed or eager: DATA now | rendezvous: wait
//             READY] -> DATA
//   receiver: ANNOUNCE -> match -> READY (rendezvous) / land or pool (eager, claimed) -> CREDIT
//             (eager)
// Adverts: a receive posted before its message is announced is advertised (ADVERT: tag, capacity,
// the last message id seen, and how many receives of the same (source, tag) wait ahead of it).
// Both sides then know which future message will match it: the (ahead+1)-th message with that tag
// after the last one the receiver had seen. The sender claims the advert with that message
// (kFlagClaimed) when it fits, and queues its data at once, in its priority lane. Matching stays
// first-in-first-out by (source, tag); a claimed message whose receive went away (cancelled)
// lands like an eager one (in the next matching receive, or a pool buffer no larger than the
// capacity the receiver advertised). An advert whose message was announced before the advert
// reached the sender simply lapses. Receives of at most kAdvertMinBytes are not advertised:
// their message goes eagerly in its lane at once anyway (a copy of a few hundred bytes out of the
// eager pool), and the ADVERT would cost a frame per message (one more UCX active message: 8 B
// ping-pong latency 20.5 -> 11-15 us over UCX tcp with spinning loops).
// One frame per small message: an eager or claimed message that fits one chunk is not announced
// on the control lane; its ANNOUNCE (kFlagInline) carries the data and waits in the SendQueue in
// the message's priority lane. ANNOUNCEs still reach the receiver in message-id order: pending
// inline sends never get more urgent with a higher id (so the SendQueue pops them in id order);
// a send that would break that, or one announced on the control lane (which goes first), first
// moves every older inline-pending send's ANNOUNCE to the control lane (its data then follows as
// a plain DATA frame). A cancelled inline-pending send is announced that way, then aborted. Credit
// is returned in batches (a CREDIT frame once half the pool is free again, or at the watchdog) and
// piggybacked on any other frame going to the peer (kFlagCredit + aux). plus REJECT (receive buffer
// too small), ABORT (sender cancelled), HEARTBEAT (liveness) and the handshake: first AUTH frames
// carrying transport/auth's version check and (with a token) the HMAC-SHA256 mutual authentication,
// then one HELLO each way. Nothing but AUTH is accepted before the authentication handshake is
// done, nothing but HELLO until the peer's HELLO arrived. A peer that fails the handshake is sent
// the refusal with its reason (best effort), then the connection fails; it is never established, so
// the Core never matches or hands it out. With TICTAC_AUTH_MAC negotiated in the handshake, every
// frame after the last AUTH frame travels behind a MAC frame carrying its tag (frame_mac.h); a
// missing, wrong, replayed or reordered tag is a protocol_error "frame authentication failed"
// raised in on_header, before anything of that frame is acted on. Every incoming frame is validated
// against this state; a violation is a protocol_error that fails the connection. Loop-thread only.
// Owned by the Core; the Request objects it points to are owned by the Core and released only
// through ConnectionHost::finish().
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/node_recycler.h"
#include "transport/auth/handshake.h"
#include "transport/backend.h"
#include "transport/config.h"
#include "transport/frame_mac.h"
#include "transport/handshake.h"
#include "transport/message_trace.h"
#include "transport/request.h"
#include "transport/send_queue.h"

namespace tictac::transport {

// Receives of at most this many bytes are not advertised (see "Adverts" above).
inline constexpr std::uint64_t kAdvertMinBytes = 256;

class Connection;

// What a Connection needs from the Core.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  // A message was announced: the matching posted receive (now bound to it), or nullptr when the
  // message is recorded as unexpected.
  virtual Request* match_message(Connection& conn, Tag tag, std::uint64_t msg_id) = 0;
  // An unexpected message of `conn` went away (sender aborted it).
  virtual void forget_message(Connection& conn, std::uint64_t msg_id) = 0;
  // Completes and releases a request.
  virtual void finish(Request* req, const Status& status, std::uint64_t bytes, PeerId source) = 0;
  virtual void connection_established(Connection& conn) = 0;
  // The connection is failing and message `msg_id` had fully arrived without a receive: the host
  // may keep it deliverable (called before connection_failed; `bytes` null when `total` is 0).
  virtual void keep_arrived(Connection& conn, std::uint64_t msg_id, Tag tag, std::uint64_t total,
                            std::unique_ptr<std::byte[]> bytes) = 0;
  // The connection reached its terminal state (its own requests are already completed).
  virtual void connection_failed(Connection& conn, const Status& status) = 0;
  virtual void schedule_pump(SendQueue& queue) = 0;
  // Messages of `conn` announced and not matched yet.
  virtual std::size_t unexpected_count(const Connection& conn) const = 0;
  // True on the thread that runs the transport's loop (Connection checks it at every entry).
  virtual bool on_loop_thread() const = 0;
  // The Context's timeline (TICTAC_TRACE), or nullptr when off.
  virtual MessageTrace* trace() const { return nullptr; }
};

class Connection final : public EndpointSink {
 public:
  enum class State { handshaking, established, failed };

  Connection(PeerId id, std::unique_ptr<Endpoint> endpoint, SendQueue& queue, ConnectionHost& host,
             const TransportConfig& config, const HelloInfo& local, bool initiator);
  ~Connection() override;

  // Starts receiving and the handshake (as initiator: sends the first AUTH frame). `auth_token`
  // (already validated) enables authentication; nullopt = none on this side. It is copied into
  // the handshake, which wipes it when done.
  void start(const std::optional<std::string>& auth_token);

  PeerId id() const { return id_; }
  State state() const { return state_; }
  bool initiator() const { return initiator_; }
  const std::string& peer_name() const { return peer_.name; }
  const Status& terminal_status() const { return terminal_; }
  std::string describe() const;
  SendQueue& queue() { return queue_; }

  // --- called by the Core ---
  void send(Request* req);
  // Advertises the waiting receive `req` (posted for this peer; `ahead` receives for the same tag
  // from this peer wait before it; no any-source receive for the tag waits). No-op when adverts
  // are off (TICTAC_ADVERTS=0), at the limit, before the handshake is done, or for a receive of
  // at most kAdvertMinBytes.
  void advertise(const Request* req, std::uint64_t ahead);
  // A posted receive matched an unexpected message of this connection.
  void bind(std::uint64_t msg_id, Request* req);
  // true if the request belonged to this connection (it completes now or as soon as no backend
  // touches its buffer any more).
  bool cancel(Request* req);
  bool has_capacity() const;
  // The endpoint's has_urgent_capacity(priority) (transport/backend.h), while the connection works.
  bool has_urgent_capacity(Priority priority) const;
  void post_chunk(const Chunk& chunk);
  // Liveness check at `now`: heartbeat if we were quiet, failure if the peer was.
  void watchdog(Clock::time_point now);
  // Terminal: completes every request of this connection with `status`, closes the endpoint.
  void fail(const Status& status);
  // Releases the endpoint object (after fail(), outside any of its callbacks).
  std::unique_ptr<Endpoint> release_endpoint() { return std::move(endpoint_); }

  // --- EndpointSink ---
  Result<Destination> on_header(const wire::Header& h) override;
  void on_frame(const wire::Header& h) override;
  void on_sent(std::uint64_t cookie) override;
  void on_writable() override;
  void on_failed(const Status& status) override;

 private:
  // Where an outgoing message is. Transitions (each made by set_out_state, which checks them):
  //   send():                       -> inline_waiting (one-frame eager/claimed) | queued
  //   announce_pending_upto():      inline_waiting -> queued (ANNOUNCE moved to the control lane)
  //   post_chunk(its inline frame): inline_waiting -> all_handed
  //   post_chunk(last DATA chunk, or the ANNOUNCE of a 0-byte message): queued -> all_handed
  //   cancel():                     queued -> cancelling (inline_waiting is first announced on
  //                                 the control lane: -> queued; all_handed: too late)
  // It leaves out_ (finish_out) from all_handed when no chunk is in flight (OK), or from
  // cancelling when none is (cancelled); from any state when the connection fails.
  enum class OutState : std::uint8_t { inline_waiting, queued, all_handed, cancelling };
  struct OutMsg {
    Request* req = nullptr;
    OutState state = OutState::queued;
    std::uint64_t control_id = 0;  // its ANNOUNCE on the control lane
    bool eager = false;            // data follows the ANNOUNCE without READY (eager or claimed)
    std::uint8_t flags = 0;        // kFlagEager / kFlagClaimed (0: rendezvous)
    std::uint64_t claim = 0;       // the advert claimed (kFlagClaimed)
    std::uint32_t chunks_out = 0;  // handed over, not yet sent
  };
  // Where an incoming message's bytes go. Transitions (set_in_sink checks them; `recv` is set
  // exactly in receive and exported):
  //   ANNOUNCE:        unmatched (no receive yet: eager bytes land in `pool`, rendezvous waits)
  //   bind_in():       unmatched -> receive | exported (rendezvous whose buffer the backend lets
  //                    the peer write, zero-copy) | discard (eager, the receive is too small)
  //   cancel():        receive -> discard (at once, or in handle_data when a chunk was landing:
  //                    cancel_pending); an exported receive stays exported with cancel_pending
  //                    until the message has landed (settle_in completes it as cancelled)
  // It leaves in_ when settled (all bytes in and a receive or discard), aborted by the sender,
  // refused (a rendezvous receive too small), or when the connection fails.
  enum class InSink : std::uint8_t { unmatched, receive, exported, discard };
  struct InMsg {
    Tag tag = 0;
    std::uint64_t total = 0;
    Priority priority = 0;
    bool eager = false;                 // data comes without READY (eager or claimed)
    std::uint64_t credit = 0;           // eager-pool bytes it holds (0 when claimed)
    Request* recv = nullptr;            // bound receive
    std::unique_ptr<std::byte[]> pool;  // eager bytes of an unexpected message
    std::uint64_t received = 0;
    InSink sink = InSink::unmatched;
    bool frame_in_progress = false;  // a DATA payload is landing (in recv's buffer or the pool)
    bool cancel_pending = false;     // cancel() arrived while it was landing / while exported
  };
  struct ControlFrame {
    wire::Header header;
    std::vector<std::byte> payload;
    std::uint64_t completes_msg = 0;  // a 0-byte message completes when its ANNOUNCE is sent
  };
  struct Sent {
    bool control = false;
    std::uint64_t control_id = 0;
    Chunk chunk;
    std::int64_t posted_ns = 0;  // data chunk handed to the backend, when traced
  };

  // Hands one frame to the endpoint, piggybacking the credit owed (kFlagCredit); a refusal fails
  // the connection.
  void post_frame(wire::Header h, const std::byte* payload, const Sent& s);
  // Every inline-pending send with an id up to `msg_id` is announced on the control lane instead
  // (in id order); its data then follows as a plain DATA frame.
  void announce_pending_upto(std::uint64_t msg_id);
  wire::Header announce_header(std::uint64_t msg_id, const OutMsg& m) const;
  // Receiver: records an ANNOUNCE and matches it; an error status fails the connection.
  Status accept_announce(const wire::Header& h);
  void push_control(wire::Header h, std::vector<std::byte> payload = {},
                    std::uint64_t completes_msg = 0);
  Status validate(const wire::Header& h);
  // TICTAC_AUTH_MAC, receiving: a MAC frame stores its tag; any other frame must match it.
  Status check_mac(const wire::Header& h);
  // TICTAC_AUTH_MAC: the auth handshake passed with MACs on both sides; derive the keys.
  Status start_frame_mac();
  Status validate_handshake(const wire::Header& h);
  void handle_auth();
  // Puts the auth handshake's pending output on the control lane (one AUTH frame); returns its
  // control id, 0 when there was nothing to send.
  std::uint64_t send_auth_output();
  void send_hello();
  // The auth handshake failed: send its refusal (if any) and fail once it left the host.
  void refuse();
  void handle_hello();
  void handle_announce(const wire::Header& h);
  void handle_data(const wire::Header& h);
  void handle_ready(const wire::Header& h);
  void handle_reject(const wire::Header& h);
  void handle_abort(const wire::Header& h);
  void handle_advert(const wire::Header& h);
  Status validate_claim(const wire::Header& h);
  // Receiver: one more message with `tag` was announced; lapses or settles the adverts it targets.
  void count_announce(Tag tag);
  // Sender: the advert (if any) that the next message with `tag` claims; advances the others.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> next_claim(Tag tag);  // (id, capacity)
  void bind_in(std::uint64_t msg_id, InMsg& m, Request* req);
  // The message's bytes are all here (or it was dropped): deliver, return credit, forget.
  void settle_in(std::uint64_t msg_id);
  void return_credit(std::uint64_t bytes);
  // Sends the credit owed to the peer as one CREDIT frame (nothing when none is owed).
  void flush_credit();
  // Moves `m` to `to`; a transition not listed at OutState is a bug (TICTAC_CHECK).
  static void set_out_state(std::uint64_t msg_id, OutMsg& m, OutState to);
  // Moves `m` to `to` (set `m.recv` first); a transition not listed at InSink is a bug.
  static void set_in_sink(std::uint64_t msg_id, InMsg& m, InSink to);
  void finish_out(std::uint64_t msg_id, const Status& status);
  Status peer_status(StatusCode code, const std::string& what) const;
  // Every entry point's first line: all Connection state belongs to the loop thread.
  void check_loop_thread(const char* entry) const;

  const PeerId id_;
  std::unique_ptr<Endpoint> endpoint_;
  std::string endpoint_desc_;
  SendQueue& queue_;
  ConnectionHost& host_;
  const TransportConfig config_;
  const HelloInfo local_;
  const bool initiator_;
  State state_ = State::handshaking;
  Status terminal_;
  HelloInfo peer_;
  std::vector<std::byte> hello_body_;
  std::vector<std::byte> auth_body_;
  std::optional<auth::Handshake> auth_;
  bool refusing_ = false;  // sending the refusal; then fail(refusal_)
  Status refusal_;
  std::uint64_t refusal_control_id_ = 0;
  // TICTAC_AUTH_MAC (null when off): the tags of frames we send and of those we receive.
  std::unique_ptr<FrameMac> mac_out_;
  std::unique_ptr<FrameMac> mac_in_;
  std::optional<FrameMac::Tag> mac_pending_;  // from the MAC frame, for the next frame
  // A frame the endpoint refused for capacity right after its MAC frame went out: it goes next,
  // on on_writable(); until then has_capacity() is false (the pair must stay adjacent).
  struct Stashed {
    wire::Header header;
    const std::byte* payload = nullptr;
    std::uint64_t cookie = 0;
  };
  std::optional<Stashed> stashed_;

  std::uint64_t next_msg_id_ = 1;
  std::uint64_t last_in_msg_id_ = 0;
  std::uint64_t next_control_id_ = std::uint64_t{1} << 63;  // disjoint from message ids
  std::uint64_t next_cookie_ = 1;
  std::uint64_t send_credit_ = 0;           // eager bytes we may still send to the peer
  std::uint64_t eager_in_use_ = 0;          // of our pool for this peer
  std::uint64_t credit_owed_ = 0;           // pool bytes freed and not yet returned to the peer
  std::set<std::uint64_t> inline_pending_;  // sends whose ANNOUNCE travels with the data
  Priority last_inline_priority_ = 0;       // of the newest one (valid while any is pending)
  std::unordered_map<std::uint64_t, OutMsg> out_;
  std::unordered_map<std::uint64_t, InMsg> in_;
  // Erased nodes of out_, in_ and inline_pending_, kept for reuse (common/node_recycler.h).
  NodeRecycler<decltype(out_), 256> out_nodes_;
  NodeRecycler<decltype(in_), 256> in_nodes_;
  NodeRecycler<decltype(inline_pending_), 256> inline_nodes_;
  // Erases an incoming message; its eager pool buffer is freed now, not when the node is reused.
  void erase_in(decltype(in_)::iterator it) {
    in_nodes_.erase(in_, it, [](InMsg& m) { m.pool.reset(); });
  }
  std::unordered_map<std::uint64_t, ControlFrame> control_;
  std::unordered_map<std::uint64_t, Sent> sent_;
  NodeRecycler<decltype(sent_), 256> sent_nodes_;  // erased nodes, reused
  // Receiver side of adverts: outstanding ones by tag, each with the number of announcements of
  // that tag still to come before its target.
  struct AdvertOut {
    std::uint64_t id;
    std::uint64_t countdown;
    std::uint64_t capacity;
  };
  std::unordered_map<Tag, std::vector<AdvertOut>> adverts_out_;
  std::size_t adverts_out_count_ = 0;
  std::uint64_t next_advert_id_ = 1;
  // Sender side: adverts received, by tag, with the sends of that tag still to come before the
  // one that claims it; and the (msg_id, tag) of messages the receiver may not have seen yet.
  struct AdvertIn {
    std::uint64_t id;
    std::uint64_t remaining;
    std::uint64_t capacity;
  };
  std::unordered_map<Tag, std::vector<AdvertIn>> adverts_in_;
  std::size_t adverts_in_count_ = 0;
  std::uint64_t last_advert_in_ = 0;
  std::deque<std::pair<std::uint64_t, Tag>> sent_log_;
  std::uint64_t sent_log_floor_ = 0;  // ids <= this fell out of the log

  Clock::time_point created_;
  Clock::time_point last_rx_;
  Clock::time_point last_tx_;
};

}  // namespace tictac::transport
