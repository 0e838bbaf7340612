#include "transport/connection.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <utility>

#include "common/check.h"
#include "common/log.h"
#include "transport/counters.h"

namespace tictac::transport {

using wire::FrameType;
using wire::Header;

namespace {
// Messages the sender remembers for counting adverts (those the receiver may not have seen).
constexpr std::size_t kSentLogMax = 4096;
}  // namespace

Connection::Connection(PeerId id, std::unique_ptr<Endpoint> endpoint, SendQueue& queue,
                       ConnectionHost& host, const TransportConfig& config, const HelloInfo& local,
                       bool initiator)
    : id_(id),
      endpoint_(std::move(endpoint)),
      endpoint_desc_(endpoint_->describe()),
      queue_(queue),
      host_(host),
      config_(config),
      local_(local),
      initiator_(initiator),
      created_(Clock::now()),
      last_rx_(created_),
      last_tx_(created_) {}

Connection::~Connection() {
  if (endpoint_) endpoint_->close();
}

std::string Connection::describe() const {
  // The name is known (and believed) only once the handshake passed.
  return "peer " + (peer_.name.empty() ? std::string() : "'" + peer_.name + "' ") + "over " +
         endpoint_desc_;
}

Status Connection::peer_status(StatusCode code, const std::string& what) const {
  return Status(code, describe() + ": " + what,
                "peer " + (peer_.name.empty() ? endpoint_desc_ : peer_.name));
}

void Connection::push_control(Header h, std::vector<std::byte> payload,
                              std::uint64_t completes_msg) {
  const std::uint64_t cid = next_control_id_++;
  control_.emplace(cid, ControlFrame{h, std::move(payload), completes_msg});
  queue_.push_control(id_, cid);
  host_.schedule_pump(queue_);
}

bool Connection::has_capacity() const {
  return state_ != State::failed && endpoint_ && !stashed_ && endpoint_->has_capacity();
}

bool Connection::has_urgent_capacity(Priority priority) const {
  return state_ != State::failed && endpoint_ && !stashed_ && endpoint_->has_urgent_capacity(priority);
}

// ---------------------------------------------------------------------------------------------
// Sending

void Connection::send(Request* req) {
  check_loop_thread("send");
  if (state_ == State::failed) {
    host_.finish(req, terminal_, 0, id_);
    return;
  }
  const std::uint64_t msg_id = next_msg_id_++;
  const std::uint64_t total = req->length();
  OutMsg m;
  m.req = req;
  const auto claim = next_claim(req->tag());
  sent_log_.emplace_back(msg_id, req->tag());
  if (sent_log_.size() > kSentLogMax) {
    sent_log_floor_ = sent_log_.front().first;
    sent_log_.pop_front();
  }
  if (claim && total <= claim->second) {  // the receive is posted: no READY round trip
    m.eager = true;
    m.flags = wire::kFlagClaimed;
    m.claim = claim->first;
  } else if (total <= send_credit_) {
    m.eager = true;
    send_credit_ -= total;
    m.flags = wire::kFlagEager;
  }
  const bool one_chunk = config_.inline_small && m.eager && total > 0 &&
                         total <= queue_.chunk_bytes() && total <= wire::kMaxChunkBytes;
  // ANNOUNCEs must reach the peer in id order. Inline-pending sends leave in id order as long as
  // none is more urgent than an older one (strict levels, FIFO within a level); a send that is
  // more urgent, or that is announced on the control lane (which goes first), has every older
  // inline-pending send announced on the control lane first.
  if (!inline_pending_.empty() && (!one_chunk || req->priority() < last_inline_priority_)) {
    announce_pending_upto(msg_id - 1);
  }
  if (one_chunk) {
    // One frame: the ANNOUNCE waits in the message's priority lane and carries the data.
    m.state = OutState::inline_waiting;
    last_inline_priority_ = req->priority();
    out_nodes_.try_emplace(out_, msg_id).first->second = m;
    inline_nodes_.try_emplace(inline_pending_, msg_id);
    queue_.push(id_, msg_id, req->priority(), total, /*whole=*/true);
    req->stamp_trace_cleared();
    host_.schedule_pump(queue_);
    return;
  }
  m.control_id = next_control_id_;
  auto it = out_nodes_.try_emplace(out_, msg_id).first;
  it->second = m;
  push_control(announce_header(msg_id, it->second), {}, total == 0 ? msg_id : 0);
  if (m.eager && total > 0) {
    queue_.push(id_, msg_id, req->priority(), total);
    req->stamp_trace_cleared();
  }
}

Header Connection::announce_header(std::uint64_t msg_id, const OutMsg& m) const {
  Header a;
  a.type = FrameType::announce;
  a.flags = m.flags;
  a.offset = m.flags == wire::kFlagClaimed ? m.claim : 0;
  a.tag = m.req->tag();
  a.msg_id = msg_id;
  a.total = m.req->length();
  a.priority = m.req->priority();
  return a;
}

void Connection::announce_pending_upto(std::uint64_t msg_id) {
  while (!inline_pending_.empty() && *inline_pending_.begin() <= msg_id) {
    const std::uint64_t id = *inline_pending_.begin();
    inline_nodes_.erase(inline_pending_, inline_pending_.begin());
    OutMsg& m = out_.at(id);
    set_out_state(id, m, OutState::queued);
    m.control_id = next_control_id_;
    push_control(announce_header(id, m));  // its data follows as a plain DATA frame
  }
}

void Connection::post_frame(Header h, const std::byte* payload, const Sent& s) {
  if (credit_owed_ > 0 && h.type != FrameType::reject && h.type != FrameType::credit &&
      h.type != FrameType::auth && h.type != FrameType::hello) {
    const std::uint64_t n = std::min<std::uint64_t>(credit_owed_, UINT32_MAX);
    h.flags |= wire::kFlagCredit;
    h.aux = static_cast<std::uint32_t>(n);
    credit_owed_ -= n;
  }
  const std::uint64_t cookie = next_cookie_++;
  sent_nodes_.try_emplace(sent_, cookie).first->second = s;
  last_tx_ = Clock::now();
  if (mac_out_ && h.type != FrameType::auth) {  // AUTH frames all precede the keys
    Result<FrameMac::Tag> tag = mac_out_->seal(h);
    if (!tag.ok()) {
      fail(peer_status(tag.status().code(),
                       "cannot authenticate a frame: " + tag.status().message()));
      return;
    }
    // The MAC frame's cookie is in no table: on_sent() ignores it.
    Status st = endpoint_->post(FrameMac::make_tag_frame(*tag), nullptr, next_cookie_++);
    if (st.ok()) st = endpoint_->post(h, payload, cookie);
    if (st.code() == StatusCode::resource_exhausted) {
      stashed_ = Stashed{h, payload, cookie};  // after its MAC frame, before anything else
      return;
    }
    if (!st.ok()) fail(peer_status(StatusCode::connection_lost, "cannot send: " + st.to_string()));
    return;
  }
  Status st = endpoint_->post(h, payload, cookie);
  if (!st.ok()) fail(peer_status(StatusCode::connection_lost, "cannot send: " + st.to_string()));
}

void Connection::post_chunk(const Chunk& chunk) {
  check_loop_thread("post_chunk");
  if (state_ == State::failed) return;
  Header h;
  const std::byte* payload = nullptr;
  Sent s;
  s.chunk = chunk;
  if (chunk.control) {
    auto it = control_.find(chunk.message);
    TICTAC_CHECK(it != control_.end(), "control frame " << chunk.message << " vanished");
    h = it->second.header;
    payload = it->second.payload.empty() ? nullptr : it->second.payload.data();
    s.control = true;
    s.control_id = chunk.message;
    if (h.type == FrameType::announce) {
      auto o = out_.find(h.msg_id);
      if (o != out_.end() && h.total == 0 && o->second.state == OutState::queued) {
        set_out_state(h.msg_id, o->second, OutState::all_handed);  // the ANNOUNCE is all of it
      }
    }
  } else {
    auto it = out_.find(chunk.message);
    TICTAC_CHECK(it != out_.end(), "data chunk of unknown message " << chunk.message);
    if (it->second.state == OutState::inline_waiting) {
      OutMsg& m = it->second;
      TICTAC_CHECK(chunk.offset == 0 && chunk.last,
                   "inline message " << chunk.message << " cut in chunks");
      TICTAC_CHECK(*inline_pending_.begin() == chunk.message,
                   "inline message " << chunk.message << " left before the older inline message "
                                     << *inline_pending_.begin());
      inline_nodes_.erase(inline_pending_, inline_pending_.begin());
      h = announce_header(chunk.message, m);
      h.flags |= wire::kFlagInline;
      h.length = static_cast<std::uint32_t>(chunk.length);
    } else {
      const OutMsg& m = it->second;
      h.type = FrameType::data;
      h.tag = m.req->tag();
      h.msg_id = chunk.message;
      h.offset = chunk.offset;
      h.total = m.req->length();
      h.priority = m.req->priority();
      h.length = static_cast<std::uint32_t>(chunk.length);
      transport_counters().count_data_frame(chunk.length);
    }
    OutMsg& m = out_.at(chunk.message);
    payload = m.req->data() + chunk.offset;
    ++m.chunks_out;
    if (chunk.last && m.state != OutState::cancelling) {
      set_out_state(chunk.message, m, OutState::all_handed);
    }
    if (m.req->state() == RequestState::queued) m.req->set_state(RequestState::posted);
    if (host_.trace() != nullptr) s.posted_ns = trace_clock_ns();
  }
  post_frame(h, payload, s);
}

void Connection::on_sent(std::uint64_t cookie) {
  check_loop_thread("on_sent");
  auto it = sent_.find(cookie);
  if (it == sent_.end()) return;
  const Sent s = it->second;
  sent_nodes_.erase(sent_, it);
  if (s.control) {
    if (refusing_ && s.control_id == refusal_control_id_) {
      fail(refusal_);  // the peer has the reason (as far as we can tell); now close
      return;
    }
    auto c = control_.find(s.control_id);
    const std::uint64_t completes = c != control_.end() ? c->second.completes_msg : 0;
    if (c != control_.end()) control_.erase(c);
    if (completes != 0 && out_.count(completes) != 0) finish_out(completes, Status::Ok());
  } else {
    queue_.on_chunk_done(s.chunk);
    auto o = out_.find(s.chunk.message);
    if (o != out_.end()) {
      OutMsg& m = o->second;
      if (MessageTrace* t = host_.trace(); t != nullptr && s.posted_ns != 0) {
        t->chunk(id_, m.req->tag(), m.req->priority(), s.chunk.message, s.chunk.offset,
                 s.chunk.length, s.posted_ns);
      }
      --m.chunks_out;
      if (m.chunks_out == 0 && m.state == OutState::cancelling) {
        finish_out(s.chunk.message, Status(StatusCode::cancelled, "send cancelled"));
      } else if (m.chunks_out == 0 && m.state == OutState::all_handed) {
        finish_out(s.chunk.message, Status::Ok());
      }
    }
  }
  host_.schedule_pump(queue_);
}

void Connection::on_writable() {
  check_loop_thread("on_writable");
  if (stashed_ && state_ != State::failed) {
    Status st = endpoint_->post(stashed_->header, stashed_->payload, stashed_->cookie);
    if (st.code() == StatusCode::resource_exhausted) return;  // the next on_writable retries
    stashed_.reset();
    if (!st.ok()) {
      fail(peer_status(StatusCode::connection_lost, "cannot send: " + st.to_string()));
      return;
    }
  }
  host_.schedule_pump(queue_);
}

void Connection::check_loop_thread(const char* entry) const {
  TICTAC_CHECK(host_.on_loop_thread(),
               "Connection::" << entry << " of " << describe() << " called off the loop thread");
}

void Connection::set_out_state(std::uint64_t msg_id, OutMsg& m, OutState to) {
  const OutState from = m.state;
  const bool allowed = (to == OutState::queued && from == OutState::inline_waiting) ||
                       (to == OutState::all_handed &&
                        (from == OutState::inline_waiting || from == OutState::queued)) ||
                       (to == OutState::cancelling && from == OutState::queued);
  TICTAC_CHECK(allowed, "send " << msg_id << ": state " << static_cast<int>(from) << " -> "
                                << static_cast<int>(to) << " is not a transition");
  m.state = to;
}

void Connection::set_in_sink(std::uint64_t msg_id, InMsg& m, InSink to) {
  const InSink from = m.sink;
  const bool allowed = (from == InSink::unmatched && to != InSink::unmatched) ||
                       (from == InSink::receive && to == InSink::discard);
  const bool bound = to == InSink::receive || to == InSink::exported;
  TICTAC_CHECK(allowed && bound == (m.recv != nullptr),
               "receive of message " << msg_id << ": sink " << static_cast<int>(from) << " -> "
                                     << static_cast<int>(to) << " is not a transition"
                                     << (bound == (m.recv != nullptr) ? "" : " (recv mismatch)"));
  m.sink = to;
}

void Connection::finish_out(std::uint64_t msg_id, const Status& status) {
  auto it = out_.find(msg_id);
  Request* req = it->second.req;
  out_nodes_.erase(out_, it);
  host_.finish(req, status, status.ok() ? req->length() : 0, id_);
}

bool Connection::cancel(Request* req) {
  check_loop_thread("cancel");
  if (req->kind() == RequestKind::send) {
    for (auto& [msg_id, m] : out_) {
      if (m.req != req) continue;
      if (m.state == OutState::cancelling || m.state == OutState::all_handed) {
        return true;  // already cancelling, or too late: on its way out
      }
      const std::uint64_t id = msg_id;
      // Even a send whose ANNOUNCE has not left yet is announced and then aborted: the receiver
      // counts every message id and tag for its adverts, so none may silently disappear. (The
      // receiver returns an aborted eager message's credit.)
      (void)queue_.remove(id_, id);
      if (m.state == OutState::inline_waiting)
        announce_pending_upto(id);  // announced now (then aborted)
      Header a;
      a.type = FrameType::abort;
      a.msg_id = id;
      push_control(a);
      set_out_state(id, m, OutState::cancelling);
      if (m.chunks_out == 0) finish_out(id, Status(StatusCode::cancelled, "send cancelled"));
      return true;
    }
    return false;
  }
  for (auto& [msg_id, m] : in_) {
    if (m.recv != req) continue;
    if (m.sink == InSink::exported) {
      // The peer may be writing into the buffer right now (zero-copy): it is ours again only
      // once the message landed or was aborted.
      m.cancel_pending = true;
      return true;
    }
    if (m.frame_in_progress) {
      m.cancel_pending = true;  // completes when the chunk now landing in its buffer is done
      return true;
    }
    m.recv = nullptr;
    set_in_sink(msg_id, m, InSink::discard);
    host_.finish(req, Status(StatusCode::cancelled, "receive cancelled"), 0, id_);
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Liveness and failure

void Connection::watchdog(Clock::time_point now) {
  check_loop_thread("watchdog");
  if (state_ == State::failed) return;
  if (state_ == State::handshaking) {
    const auto limit = std::min(config_.timeout, config_.handshake_timeout);
    if (now - created_ > limit && refusing_) {
      fail(refusal_);  // the refusal never left: close anyway
    } else if (now - created_ > limit) {
      fail(peer_status(StatusCode::timeout, "handshake did not complete within " +
                                                std::to_string(limit.count()) +
                                                " ms (TICTAC_HANDSHAKE_TIMEOUT / TICTAC_TIMEOUT)"));
    }
    return;
  }
  if (now - last_rx_ > config_.timeout) {
    fail(peer_status(StatusCode::connection_lost,
                     "no frame from the peer for " + std::to_string(config_.timeout.count()) +
                         " ms (TICTAC_TIMEOUT): it hung, was stopped, or the network is down"));
    return;
  }
  flush_credit();  // what no frame took along since the last watchdog round
  if (now - last_tx_ > config_.timeout / 4) {
    Header hb;
    hb.type = FrameType::heartbeat;
    last_tx_ = now;
    push_control(hb);
  }
}

void Connection::on_failed(const Status& status) {
  check_loop_thread("on_failed");
  if (refusing_) {  // e.g. the peer read our refusal and hung up first: ours is the real cause
    fail(refusal_);
    return;
  }
  // Statuses from our own on_header() already name the peer.
  const bool named = status.message().rfind("peer ", 0) == 0;
  fail(named ? status : peer_status(status.code(), status.message()));
}

void Connection::fail(const Status& status) {
  check_loop_thread("fail");
  if (state_ == State::failed) return;
  state_ = State::failed;
  terminal_ = status;
  if (status.code() == StatusCode::protocol_error) {
    TICTAC_LOG(warn) << "closing the connection: " << status.message();
  } else {
    TICTAC_LOG(debug) << "connection failed: " << status.to_string();
  }
  if (endpoint_) endpoint_->close();
  queue_.remove_peer(id_);
  control_.clear();
  sent_.clear();
  stashed_.reset();
  inline_pending_.clear();
  credit_owed_ = 0;
  std::vector<Request*> reqs;
  for (auto& [msg_id, m] : out_) reqs.push_back(m.req);
  for (auto& [msg_id, m] : in_) {
    if (m.recv != nullptr) {
      reqs.push_back(m.recv);
    } else if (m.sink == InSink::unmatched && m.eager && m.received == m.total &&
               !m.frame_in_progress) {
      // Arrived whole, no receive yet: still deliverable (the bytes of a closed socket are).
      host_.keep_arrived(*this, msg_id, m.tag, m.total, std::move(m.pool));
    }
  }
  out_.clear();
  in_.clear();
  for (Request* r : reqs) host_.finish(r, terminal_, 0, id_);
  host_.connection_failed(*this, terminal_);
}

}  // namespace tictac::transport
