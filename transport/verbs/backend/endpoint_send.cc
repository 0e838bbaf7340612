// VerbsEndpoint, send side: cutting frames into staging slots, posting chains of RDMA WRITE WITH
// IMMEDIATE, retiring them on completions.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "common/check.h"
#include "transport/verbs/backend/endpoint.h"

namespace tictac::verbs {

using transport::wire::kHeaderBytes;

bool VerbsEndpoint::has_capacity() const {
  const bool yes = !closed_ && connected_ && !cutting_.has_value() && slot_free();
  if (!yes) want_writable_ = true;
  return yes;
}

bool VerbsEndpoint::slot_free() const {
  return next_seq_ - credited_ < peer_.ring_slots && next_seq_ - completed_ < send_window_;
}

Status VerbsEndpoint::post(const transport::wire::Header& header, const std::byte* payload, std::uint64_t cookie) {
  if (closed_) {
    return Status(StatusCode::connection_lost,
                  failure_.ok() ? std::string("endpoint closed") : failure_.message());
  }
  if (!has_capacity()) {
    return Status(StatusCode::resource_exhausted, "no capacity: the peer's receive ring is full");
  }
  OutFrame f;
  f.header = transport::wire::encode(header);
  f.payload = payload;
  f.length = header.length;
  f.cookie = cookie;
  if (Status st = prepare_frame(header, f); !st.ok()) {
    failure_ = st;
    teardown();  // the core fails the connection with this Status (no sink call from here)
    return st;
  }
  cutting_ = std::move(f);
  cut();
  return Status::Ok();
}

// Copies as many fragments of the frame being cut as there are free slots into staging.
void VerbsEndpoint::cut() {
  while (cutting_.has_value() && slot_free()) {
    OutFrame& f = *cutting_;
    const std::uint64_t seq = next_seq_++;
    std::byte* slot = staging_.get() + (seq % send_window_) * std::uint64_t{peer_stride_};
    const std::uint64_t remote = peer_.ring_addr + (seq % peer_.ring_slots) * std::uint64_t{peer_stride_};
    const std::uint32_t n = std::min(f.length - f.cut, peer_.slot_bytes);
    if (f.kind != SlotKind::frame) {
      cut_zero_copy(seq, remote, slot, f);
      continue;
    }
    PendingWr wr{seq, 0, 0, 0};
    if (!f.header_cut) {
      std::memcpy(slot, f.header.data(), kHeaderBytes);
      std::memset(slot + kHeaderBytes, 0, kSlotHeaderRoom - kHeaderBytes);  // kind `frame`
      wr.local = reinterpret_cast<std::uintptr_t>(slot);
      wr.remote = remote;
      wr.length = kSlotHeaderRoom + n;
      f.header_cut = true;
    } else {
      wr.local = reinterpret_cast<std::uintptr_t>(slot + kSlotHeaderRoom);
      wr.remote = remote + kSlotHeaderRoom;
      wr.length = n;
    }
    if (n > 0) std::memcpy(slot + kSlotHeaderRoom, f.payload + f.cut, n);
    f.cut += n;
    pending_wrs_.push_back(wr);
    if (f.cut == f.length) {
      in_flight_.push_back(Sent{seq, f.cookie, nullptr});
      cutting_.reset();
    }
  }
  if (!pending_wrs_.empty()) schedule_flush();
}

void VerbsEndpoint::schedule_flush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  if (flush_call_ == 0) {
    flush_call_ = dev_->engine().add_deferred_call([this] {
      flush_scheduled_ = false;
      flush();
    });
  }
  dev_->engine().defer_call(flush_call_);
}

// Posts every cut fragment as one chain (one doorbell). Signalled: every signal_every-th request
// and the chain's last, so no request is left without a completion that covers it.
void VerbsEndpoint::flush() {
  if (closed_ || pending_wrs_.empty()) return;
  const std::size_t n = pending_wrs_.size();
  std::vector<ibv_sge> sges(n);
  std::vector<ibv_send_wr> wrs(n);
  const std::uint32_t every = dev_->config().signal_every;
  for (std::size_t i = 0; i < n; ++i) {
    const PendingWr& p = pending_wrs_[i];
    sges[i].addr = p.local;
    sges[i].length = p.length;
    sges[i].lkey = p.plain_write ? p.lkey : staging_mr_->lkey();
    ibv_send_wr& w = wrs[i];
    w.sg_list = &sges[i];
    w.num_sge = 1;
    w.wr.rdma.remote_addr = p.remote;
    if (p.plain_write) {
      // Never signalled: the ring fragment right behind it (same chain) covers it.
      w.wr_id = make_wr_id(id_, WrKind::data_write, p.seq);
      w.opcode = IBV_WR_RDMA_WRITE;
      w.wr.rdma.rkey = p.rkey;
      w.next = &wrs[i + 1];
      continue;
    }
    w.wr_id = make_wr_id(id_, WrKind::data_send, p.seq);
    w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.imm_data = htonl(static_cast<std::uint32_t>(p.seq));
    w.wr.rdma.rkey = peer_.ring_rkey;
    if (++since_signal_ >= every || i + 1 == n) {
      w.send_flags = IBV_SEND_SIGNALED;
      since_signal_ = 0;
    }
    w.next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  pending_wrs_.clear();
  ibv_send_wr* bad = nullptr;
  if (const int rc = api_.post_send(data_qp_.get(), wrs.data(), &bad); rc != 0) {
    fail(errno_status(StatusCode::internal,
                      "ibv_post_send of " + std::to_string(n) + " RDMA writes on the data QP failed (send queue "
                      "accounting broken or QP unusable)",
                      "ibv_post_send", rc));
  }
}

// A signalled write completed: it and every earlier write of the QP are done.
void VerbsEndpoint::on_send_done(std::uint64_t value) {
  const std::uint64_t seq = completed_ + ((value - completed_) & kWrValueMask);
  if (seq >= next_seq_) {
    fail(Status(StatusCode::internal, "send completion for fragment " + std::to_string(seq) +
                                          " that was never posted (" + std::to_string(next_seq_) + " were)"));
    return;
  }
  completed_ = seq + 1;
  const auto self = lifetime_.token();
  while (!in_flight_.empty() && in_flight_.front().last_seq < completed_) {
    const std::uint64_t cookie = in_flight_.front().cookie;
    in_flight_.pop_front();
    if (sink_ != nullptr) sink_->on_sent(cookie);
    if (!self.alive() || closed_) return;
  }
  cut();
  maybe_writable();
}

void VerbsEndpoint::maybe_writable() {
  if (!want_writable_ || closed_ || sink_ == nullptr) return;
  if (!connected_ || cutting_.has_value() || !slot_free()) return;
  want_writable_ = false;
  sink_->on_writable();
}

}  // namespace tictac::verbs
