// VerbsEndpoint, receive side: fragments landing in the receive ring, delivery into the core's
// Destination, and ring credits in both directions.
#include <arpa/inet.h>

#include <cstring>

#include "transport/verbs/backend/endpoint.h"

namespace tictac::verbs {

using transport::wire::kHeaderBytes;

Status VerbsEndpoint::post_recvs(QueuePair& qp, WrKind kind, std::uint32_t n) {
  // Receives carry no buffer: WRITE WITH IMMEDIATE puts its data into the ring by address, and
  // credit messages are 0-byte SENDs.
  std::vector<ibv_recv_wr> wrs(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    wrs[i].wr_id = make_wr_id(id_, kind, 0);
    wrs[i].sg_list = nullptr;
    wrs[i].num_sge = 0;
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  if (const int rc = api_.post_recv(qp.get(), wrs.data(), &bad); rc != 0) {
    return errno_status(StatusCode::internal,
                        "ibv_post_recv of " + std::to_string(n) + " receives failed (receive queue accounting "
                        "broken or QP unusable)",
                        "ibv_post_recv", rc);
  }
  return Status::Ok();
}

void VerbsEndpoint::on_fragment(const ibv_wc& wc) {
  if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (wc.wc_flags & IBV_WC_WITH_IMM) == 0) {
    fail(protocol_error("the data QP received something other than an RDMA WRITE WITH IMMEDIATE"));
    return;
  }
  const std::uint32_t seq32 = ntohl(wc.imm_data);
  if (seq32 != static_cast<std::uint32_t>(recv_seq_)) {
    fail(protocol_error("fragment " + std::to_string(seq32) + " arrived where fragment " +
                        std::to_string(static_cast<std::uint32_t>(recv_seq_)) + " was due"));
    return;
  }
  if (wc.byte_len > ring_stride_) {
    fail(protocol_error("fragment of " + std::to_string(wc.byte_len) + " bytes exceeds a ring slot"));
    return;
  }
  const Arrival a{recv_seq_++, wc.byte_len};
  if (Status st = post_recvs(data_qp_, WrKind::data_recv, 1); !st.ok()) {
    fail(st);
    return;
  }
  if (!started_ || !early_.empty()) {
    early_.push_back(a);  // delivered by start()
    return;
  }
  deliver(a);
}

// Hands one fragment to the sink: header and Destination on the first fragment of a frame,
// payload bytes into the Destination, on_frame after the last. Frees the slot (credit) once copied.
void VerbsEndpoint::deliver(const Arrival& a) {
  const std::byte* slot = ring_.get() + (a.seq % local_.ring_slots) * std::uint64_t{ring_stride_};
  const std::uint32_t slot_bytes = local_.slot_bytes;
  std::uint32_t n = 0;
  SlotKind kind = SlotKind::frame;
  const auto self = lifetime_.token();
  if (!in_frame_) {
    if (a.bytes < kSlotHeaderRoom) {
      fail(protocol_error("fragment of " + std::to_string(a.bytes) + " bytes cannot hold a frame header"));
      return;
    }
    Result<transport::wire::Header> h =
        transport::wire::decode(std::span<const std::byte>(slot, kHeaderBytes));
    if (!h.ok()) {
      fail(h.status());
      return;
    }
    kind = static_cast<SlotKind>(std::to_integer<std::uint8_t>(slot[kSlotKindOffset]));
    n = a.bytes - kSlotHeaderRoom;
    if (kind != SlotKind::frame) {
      if (Status st = accept_special(kind, *h, slot, a.bytes); !st.ok()) {
        fail(st);
        return;
      }
      n = 0;
    } else if (n != std::min(h->length, slot_bytes)) {
      fail(protocol_error("first fragment of a " + std::to_string(h->length) + "-byte frame carries " +
                          std::to_string(n) + " payload bytes"));
      return;
    }
    Result<transport::Destination> d = sink_->on_header(*h);
    if (!self.alive() || closed_) return;
    if (!d.ok()) {
      fail(d.status());
      return;
    }
    if (h->length > 0 && !d->discard && d->data == nullptr) {
      fail(Status(StatusCode::internal, "the core gave no destination for a " + std::to_string(h->length) +
                                            "-byte frame"));
      return;
    }
    if (kind == SlotKind::written && !d->discard && d->data != written_at(*h)) {
      fail(Status(StatusCode::internal, "the core's destination for message " + std::to_string(h->msg_id) +
                                            " is not the buffer it exported for zero-copy writes"));
      return;
    }
    cur_ = *h;
    dest_ = *d;
    got_ = kind == SlotKind::written ? h->length : 0;  // already in place
    in_frame_ = true;
  } else {
    n = a.bytes;
    if (n != std::min(cur_.length - got_, slot_bytes)) {
      fail(protocol_error("fragment of " + std::to_string(n) + " bytes where " +
                          std::to_string(std::min(cur_.length - got_, slot_bytes)) + " were due"));
      return;
    }
  }
  if (n > 0 && !dest_.discard) std::memcpy(dest_.data + got_, slot + kSlotHeaderRoom, n);
  got_ += n;
  ++credits_owed_;
  schedule_credit();
  if (got_ == cur_.length) {
    in_frame_ = false;
    release_export(cur_);  // deregistered before the core may complete (and free) the receive
    sink_->on_frame(cur_);
  }
}

void VerbsEndpoint::on_credit(const ibv_wc& wc) {
  if ((wc.wc_flags & IBV_WC_WITH_IMM) == 0 || wc.byte_len != 0) {
    fail(protocol_error("the control QP received a message that is not a credit"));
    return;
  }
  const std::uint32_t count = ntohl(wc.imm_data);
  if (count == 0 || credited_ + count > next_seq_) {
    fail(protocol_error("credit for " + std::to_string(count) + " slots, but only " +
                        std::to_string(next_seq_ - credited_) + " are in use"));
    return;
  }
  credited_ += count;
  if (Status st = post_recvs(ctrl_qp_, WrKind::ctrl_recv, 1); !st.ok()) {
    fail(st);
    return;
  }
  cut();
  maybe_writable();
}

void VerbsEndpoint::schedule_credit() {
  if (credit_scheduled_) return;
  credit_scheduled_ = true;
  if (credit_call_ == 0) {
    credit_call_ = dev_->engine().add_deferred_call([this] {
      credit_scheduled_ = false;
      send_credit();
    });
  }
  dev_->engine().defer_call(credit_call_);
}

// One credit message for every slot freed since the last one, if the peer can take it now;
// otherwise the credits wait for the next control completion.
void VerbsEndpoint::send_credit() {
  if (closed_ || credits_owed_ == 0 || ctrl_in_flight_ >= ctrl_window_) return;
  ibv_send_wr w{};
  w.wr_id = make_wr_id(id_, WrKind::ctrl_send, 0);
  w.opcode = IBV_WR_SEND_WITH_IMM;
  w.num_sge = 0;
  w.send_flags = IBV_SEND_SIGNALED;
  w.imm_data = htonl(credits_owed_);
  ibv_send_wr* bad = nullptr;
  if (const int rc = api_.post_send(ctrl_qp_.get(), &w, &bad); rc != 0) {
    fail(errno_status(StatusCode::internal, "ibv_post_send of a credit on the control QP failed", "ibv_post_send", rc));
    return;
  }
  ++ctrl_in_flight_;
  credits_owed_ = 0;
}

}  // namespace tictac::verbs
