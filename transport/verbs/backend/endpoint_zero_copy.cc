// VerbsEndpoint, zero-copy: exporting receive buffers, carrying exports in READY, writing DATA
// straight into the peer's export, and checking what the peer says about it (slot.h).
#include <cstring>

#include "common/log.h"
#include "transport/verbs/backend/endpoint.h"

namespace tictac::verbs {

using transport::wire::FrameType;
using transport::wire::Header;
using transport::wire::kHeaderBytes;

bool VerbsEndpoint::export_destination(std::uint64_t msg_id, std::byte* data, std::uint64_t length) {
  const VerbsConfig& cfg = dev_->config();
  if (closed_ || !cfg.zero_copy || data == nullptr || length == 0 || length < cfg.zero_copy_min_bytes) {
    return false;
  }
  Result<std::shared_ptr<const Registration>> mr = dev_->registrations().acquire(
      data, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
      "receive buffer of message " + std::to_string(msg_id) + " (zero-copy destination)");
  if (!mr.ok()) {
    TICTAC_LOG(warn) << desc_ << ": " << mr.status().message() << "; the message goes through the receive ring";
    return false;
  }
  exports_[msg_id] = LocalExport{data, length, std::move(mr).value(), false};
  return true;
}

Status VerbsEndpoint::prepare_frame(const Header& h, OutFrame& f) {
  if (h.type == FrameType::ready) {
    auto e = exports_.find(h.msg_id);
    if (e == exports_.end() || e->second.advertised) return Status::Ok();
    e->second.advertised = true;
    f.kind = SlotKind::ready_export;
    f.target = DestinationExport{reinterpret_cast<std::uintptr_t>(e->second.data), e->second.mr->rkey(),
                                 e->second.length};
    return Status::Ok();
  }
  if (h.type == FrameType::abort) {  // we cancelled the message: no more writes into its export
    remote_exports_.erase(h.msg_id);
    return Status::Ok();
  }
  if (h.type != FrameType::data || h.length == 0) return Status::Ok();
  auto r = remote_exports_.find(h.msg_id);
  if (r == remote_exports_.end()) return Status::Ok();
  const bool last = h.offset + h.length == h.total;
  RemoteExport& x = r->second;
  if (!dev_->config().zero_copy) {  // the peer offered; we send through the ring anyway
    if (last) remote_exports_.erase(r);
    return Status::Ok();
  }
  if (x.target.length != h.total) {
    return protocol_error("the peer exported " + std::to_string(x.target.length) + " bytes for message " +
                          std::to_string(h.msg_id) + " of " + std::to_string(h.total) + " bytes");
  }
  if (!x.source) {
    // The whole message buffer, once: later chunks find it in the cache through this reference.
    Result<std::shared_ptr<const Registration>> mr = dev_->registrations().acquire(
        const_cast<std::byte*>(f.payload - h.offset), h.total, 0,
        "send buffer of message " + std::to_string(h.msg_id) + " (zero-copy source)");
    if (!mr.ok()) {
      TICTAC_LOG(warn) << desc_ << ": " << mr.status().message() << "; message " << h.msg_id
                       << " goes through the rings instead";
      remote_exports_.erase(r);
      return Status::Ok();
    }
    x.source = std::move(mr).value();
  }
  f.kind = SlotKind::written;
  f.target = DestinationExport{x.target.addr + h.offset, x.target.rkey, h.length};
  f.source = x.source;
  if (last) remote_exports_.erase(r);
  return Status::Ok();
}

// One fragment that carries the frame's header: READY with our export, or a DATA header behind
// the plain RDMA WRITE of its payload. Completes the frame being cut.
void VerbsEndpoint::cut_zero_copy(std::uint64_t seq, std::uint64_t remote_slot, std::byte* slot, OutFrame& f) {
  std::memcpy(slot, f.header.data(), kHeaderBytes);
  std::memset(slot + kHeaderBytes, 0, kSlotHeaderRoom - kHeaderBytes);
  slot[kSlotKindOffset] = std::byte{static_cast<std::uint8_t>(f.kind)};
  PendingWr frag{seq, reinterpret_cast<std::uintptr_t>(slot), kSlotHeaderRoom, remote_slot};
  if (f.kind == SlotKind::ready_export) {
    encode_export(f.target, slot + kSlotHeaderRoom);
    frag.length += kExportBytes;
  } else {
    pending_wrs_.push_back(PendingWr{seq, reinterpret_cast<std::uintptr_t>(f.payload), f.length, f.target.addr,
                                     true, f.source->lkey(), f.target.rkey});
  }
  pending_wrs_.push_back(frag);
  in_flight_.push_back(Sent{seq, f.cookie, std::move(f.source)});
  cutting_.reset();  // `f` is gone
}

Status VerbsEndpoint::accept_special(SlotKind kind, const Header& h, const std::byte* slot, std::uint32_t bytes) {
  const std::string msg = "message " + std::to_string(h.msg_id);
  if (kind == SlotKind::ready_export) {
    if (h.type != FrameType::ready || h.length != 0 || bytes != kSlotHeaderRoom + kExportBytes) {
      return protocol_error("a destination export in a " + std::string(transport::wire::to_string(h.type)) +
                            " frame of " + std::to_string(bytes) + " bytes (only READY carries one)");
    }
    const DestinationExport e = decode_export(slot + kSlotHeaderRoom);
    if (e.length == 0) return protocol_error("an empty destination export for " + msg);
    if (!remote_exports_.emplace(h.msg_id, RemoteExport{e, nullptr}).second) {
      return protocol_error("a second destination export for " + msg);
    }
    return Status::Ok();
  }
  if (kind == SlotKind::written) {
    if (h.type != FrameType::data || h.length == 0 || bytes != kSlotHeaderRoom) {
      return protocol_error("a zero-copy arrival notice that is not a header-only DATA frame");
    }
    auto e = exports_.find(h.msg_id);
    if (e == exports_.end()) return protocol_error("zero-copy DATA for " + msg + ", which we never exported");
    if (h.offset > e->second.length || h.length > e->second.length - h.offset) {
      return protocol_error("zero-copy DATA at " + std::to_string(h.offset) + "+" + std::to_string(h.length) +
                            " beyond the " + std::to_string(e->second.length) + " bytes exported for " + msg);
    }
    return Status::Ok();
  }
  return protocol_error("unknown ring slot kind " + std::to_string(static_cast<unsigned>(kind)));
}

std::byte* VerbsEndpoint::written_at(const Header& h) const { return exports_.at(h.msg_id).data + h.offset; }

void VerbsEndpoint::release_export(const Header& h) {
  if ((h.type == FrameType::data && h.offset + h.length == h.total) || h.type == FrameType::abort) {
    exports_.erase(h.msg_id);
  }
}

}  // namespace tictac::verbs
