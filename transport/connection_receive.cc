// Connection: incoming frames of an established connection (headers, ANNOUNCE/DATA/READY/
// REJECT/ABORT handling, frame MAC checks, binding receives and returning credit). The sending
// side, liveness and failure are in connection.cc; the handshake in connection_handshake.cc.
#include <algorithm>
#include <cstring>
#include <span>
#include <utility>

#include "common/check.h"
#include "common/log.h"
#include "transport/connection.h"
#include "transport/counters.h"

namespace tictac::transport {

using wire::FrameType;
using wire::Header;

Result<Destination> Connection::on_header(const Header& h) {
  check_loop_thread("on_header");
  last_rx_ = Clock::now();
  Destination d;
  if (refusing_) {  // the refusal is on its way out; whatever the peer says now is dropped
    d.discard = true;
    return d;
  }
  if (mac_in_) {
    Status mac = check_mac(h);
    if (!mac.ok()) return mac;
    if (h.type == FrameType::mac) return d;  // its tag waits for the next frame
  } else if (h.type == FrameType::mac) {
    return peer_status(StatusCode::protocol_error,
                       "MAC frame, but frame MACs are not in use on this connection (they start "
                       "after the handshake, with TICTAC_AUTH_MAC=1 on both sides)");
  }
  Status st = validate(h);
  if (!st.ok()) return st;
  if ((h.flags & wire::kFlagCredit) != 0) send_credit_ += h.aux;
  if (h.type == FrameType::announce && (h.flags & wire::kFlagInline) != 0) {
    st = accept_announce(h);  // matched now: the payload lands like an eager DATA frame
    if (!st.ok()) return st;
  }
  if (h.type == FrameType::auth) {
    auth_body_.resize(h.length);
    d.data = auth_body_.data();
  } else if (h.type == FrameType::hello) {
    hello_body_.resize(h.length);
    d.data = hello_body_.data();
  } else if ((h.type == FrameType::data || h.type == FrameType::announce) && h.length > 0) {
    InMsg& m = in_.at(h.msg_id);
    const std::uint64_t at = h.type == FrameType::data ? h.offset : 0;  // inline: offset = claim
    if (m.sink == InSink::discard) {
      d.discard = true;
    } else if (m.recv != nullptr) {
      d.data = m.recv->data() + at;
      m.frame_in_progress = true;
    } else {
      d.data = m.pool.get() + at;
      m.frame_in_progress = true;
    }
  }
  return d;
}

void Connection::on_frame(const Header& h) {
  check_loop_thread("on_frame");
  last_rx_ = Clock::now();
  if (refusing_) return;
  switch (h.type) {
    case FrameType::auth:
      handle_auth();
      break;
    case FrameType::hello:
      handle_hello();
      break;
    case FrameType::announce:
      if ((h.flags & wire::kFlagInline) != 0) {
        handle_data(h);  // accepted in on_header; this is its payload
      } else {
        handle_announce(h);
      }
      break;
    case FrameType::data:
      handle_data(h);
      break;
    case FrameType::ready:
      handle_ready(h);
      break;
    case FrameType::reject:
      handle_reject(h);
      break;
    case FrameType::credit:
      send_credit_ += h.total;
      host_.schedule_pump(queue_);
      break;
    case FrameType::abort:
      handle_abort(h);
      break;
    case FrameType::heartbeat:
    case FrameType::mac:  // checked in on_header; nothing to do
      break;
    case FrameType::advert:
      handle_advert(h);
      break;
  }
}

Status Connection::check_mac(const Header& h) {
  Status st;
  if (!mac_pending_) {
    Result<FrameMac::Tag> tag = FrameMac::parse_tag_frame(h);
    if (tag.ok()) {
      mac_pending_ = *tag;
      return Status::Ok();
    }
    st = tag.status();
  } else if (h.type == FrameType::mac) {
    st = Status(StatusCode::protocol_error, "frame authentication failed: two MAC frames in a row");
  } else {
    const FrameMac::Tag tag = *mac_pending_;
    mac_pending_.reset();
    st = mac_in_->verify(h, tag);
    if (st.ok()) return st;
  }
  return peer_status(st.code(), st.message());
}

void Connection::handle_announce(const Header& h) {
  Status st = accept_announce(h);
  if (!st.ok()) fail(st);
}

Status Connection::accept_announce(const Header& h) {
  last_in_msg_id_ = h.msg_id;
  count_announce(h.tag);
  const std::uint8_t kind =
      h.flags & static_cast<std::uint8_t>(~(wire::kFlagCredit | wire::kFlagInline));
  InMsg m;
  m.tag = h.tag;
  m.total = h.total;
  m.priority = h.priority;
  m.eager = kind != 0;  // eager or claimed: the data follows without READY
  if (kind == wire::kFlagClaimed) {
    transport_counters().claimed_received.fetch_add(1, std::memory_order_relaxed);
  }
  m.credit = kind == wire::kFlagEager ? h.total : 0;
  eager_in_use_ += m.credit;
  auto [it, inserted] = in_nodes_.try_emplace(in_, h.msg_id);
  if (inserted) it->second = std::move(m);
  TICTAC_CHECK(inserted, "message id reused after validation");
  Request* req = host_.match_message(*this, h.tag, h.msg_id);
  if (req == nullptr && host_.unexpected_count(*this) > config_.max_unexpected) {
    return peer_status(StatusCode::protocol_error,
                       "more than " + std::to_string(config_.max_unexpected) +
                           " announced messages wait for a receive (TICTAC_MAX_UNEXPECTED): post "
                           "receives sooner or raise the limit");
  }
  if (req != nullptr) {
    bind_in(h.msg_id, it->second, req);
  } else if (it->second.eager && it->second.total > 0) {
    it->second.pool = std::make_unique<std::byte[]>(it->second.total);
  }
  return Status::Ok();
}

void Connection::bind(std::uint64_t msg_id, Request* req) {
  check_loop_thread("bind");
  auto it = in_.find(msg_id);
  TICTAC_CHECK(it != in_.end(), "bind to unknown message " << msg_id);
  bind_in(msg_id, it->second, req);
}

void Connection::bind_in(std::uint64_t msg_id, InMsg& m, Request* req) {
  if (m.total > req->length()) {
    const Status too_small(StatusCode::invalid_argument,
                           "message of " + std::to_string(m.total) + " bytes (tag " +
                               std::to_string(m.tag) + ") from " + describe() +
                               " does not fit the posted receive of " +
                               std::to_string(req->length()) + " bytes");
    host_.finish(req, too_small, 0, id_);
    if (m.eager) {
      set_in_sink(msg_id, m, InSink::discard);
      m.pool.reset();
      if (m.received == m.total) settle_in(msg_id);
    } else {
      Header r;
      r.type = FrameType::reject;
      r.msg_id = msg_id;
      r.aux = static_cast<std::uint32_t>(StatusCode::invalid_argument);
      push_control(r);
      if (auto e = in_.find(msg_id); e != in_.end()) erase_in(e);
    }
    return;
  }
  m.recv = req;
  const bool exported =
      !m.eager && m.total > 0 && endpoint_->export_destination(msg_id, req->data(), m.total);
  set_in_sink(msg_id, m, exported ? InSink::exported : InSink::receive);
  req->set_state(RequestState::posted);
  if (!m.frame_in_progress) {  // else the chunk landing in the pool now is copied when it is done
    if (m.pool && m.received > 0) std::memcpy(req->data(), m.pool.get(), m.received);
    m.pool.reset();
  }
  if (!m.eager) {
    Header r;
    r.type = FrameType::ready;
    r.msg_id = msg_id;
    push_control(r);
    transport_counters().readies_sent.fetch_add(1, std::memory_order_relaxed);
    if (m.total == 0) settle_in(msg_id);
    return;
  }
  if (m.received == m.total) settle_in(msg_id);
}

void Connection::handle_data(const Header& h) {
  if (MessageTrace* t = host_.trace()) t->landed(id_, h);
  InMsg& m = in_.at(h.msg_id);
  m.received += h.length;
  m.frame_in_progress = false;
  if (m.cancel_pending && m.sink == InSink::receive) {
    Request* req = m.recv;
    m.recv = nullptr;
    set_in_sink(h.msg_id, m, InSink::discard);
    m.cancel_pending = false;
    m.pool.reset();
    host_.finish(req, Status(StatusCode::cancelled, "receive cancelled"), 0, id_);
  }
  if (m.recv != nullptr && m.pool) {  // bound while this chunk was landing in the eager pool
    std::memcpy(m.recv->data(), m.pool.get(), m.received);
    m.pool.reset();
  }
  if (m.received == m.total) settle_in(h.msg_id);
}

void Connection::settle_in(std::uint64_t msg_id) {
  auto it = in_.find(msg_id);
  InMsg& m = it->second;
  if (m.sink == InSink::unmatched) return;  // unexpected and complete: waits for its receive
  Request* req = m.recv;
  const std::uint64_t total = m.total;
  const std::uint64_t credit = m.credit;
  const bool cancelled = m.cancel_pending;  // an exported receive cancelled while it landed
  erase_in(it);
  if (credit > 0) return_credit(credit);
  if (req != nullptr && cancelled) {
    host_.finish(req,
                 Status(StatusCode::cancelled,
                        "receive cancelled (its buffer was exported for zero-copy writes by the "
                        "peer, so it completed once the message had landed)"),
                 0, id_);
  } else if (req != nullptr) {
    host_.finish(req, Status::Ok(), total, id_);
  }
}

void Connection::return_credit(std::uint64_t bytes) {
  eager_in_use_ -= bytes;
  if (bytes == 0 || state_ == State::failed) return;
  credit_owed_ += bytes;
  // Batched: the next frame to the peer carries it (post_frame); a CREDIT frame of its own only
  // once half the pool is owed (or at the watchdog), so the sender never runs low.
  if (credit_owed_ >= std::max<std::uint64_t>(1, config_.eager_bytes / 2)) flush_credit();
}

void Connection::flush_credit() {
  if (credit_owed_ == 0 || state_ != State::established) return;
  Header c;
  c.type = FrameType::credit;
  c.total = std::exchange(credit_owed_, 0);
  push_control(c);
}

void Connection::handle_ready(const Header& h) {
  auto it = out_.find(h.msg_id);
  if (it == out_.end() || it->second.state == OutState::cancelling) return;  // cancelled meanwhile
  OutMsg& m = it->second;
  if (m.req->length() == 0) {
    finish_out(h.msg_id, Status::Ok());
    return;
  }
  queue_.push(id_, h.msg_id, m.req->priority(), m.req->length());
  m.req->stamp_trace_cleared();
  host_.schedule_pump(queue_);
}

void Connection::handle_reject(const Header& h) {
  auto it = out_.find(h.msg_id);
  if (it == out_.end() || it->second.state == OutState::cancelling) return;
  finish_out(h.msg_id, peer_status(static_cast<StatusCode>(h.aux),
                                   "the receiver refused message " + std::to_string(h.msg_id) +
                                       " (tag " + std::to_string(it->second.req->tag()) +
                                       "): its posted receive is too small"));
}

void Connection::handle_abort(const Header& h) {
  auto it = in_.find(h.msg_id);
  if (it == in_.end()) return;  // already settled or refused
  InMsg& m = it->second;
  Request* req = m.recv;
  const std::uint64_t credit = m.credit;
  if (m.sink == InSink::unmatched) host_.forget_message(*this, h.msg_id);
  erase_in(it);
  if (credit > 0) return_credit(credit);
  if (req != nullptr) {
    host_.finish(req, peer_status(StatusCode::cancelled, "the sender cancelled the message"), 0,
                 id_);
  }
}

}  // namespace tictac::transport
