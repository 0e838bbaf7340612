// VerbsEndpoint: setup, dispatch of completions, failure and teardown. The data path is in
// endpoint_send.cc and endpoint_recv.cc.
#include "transport/verbs/backend/endpoint.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <random>
#include <sstream>

#include "common/log.h"

namespace tictac::verbs {
namespace {

constexpr std::size_t kPage = 4096;

std::byte* alloc_pages(std::size_t bytes) {
  const std::size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  return static_cast<std::byte*>(std::aligned_alloc(kPage, rounded));
}

std::uint32_t random_psn() {
  static thread_local std::mt19937 rng(std::random_device{}());
  return rng() & 0xffffff;
}

}  // namespace

VerbsEndpoint::VerbsEndpoint(std::shared_ptr<Device> device) : dev_(std::move(device)), api_(dev_->api()) {}

Result<std::unique_ptr<VerbsEndpoint>> VerbsEndpoint::create(std::shared_ptr<Device> device) {
  if (!device->dead().ok()) return device->dead();
  std::unique_ptr<VerbsEndpoint> ep(new VerbsEndpoint(std::move(device)));
  TICTAC_RETURN_IF_ERROR(ep->init());
  return ep;
}

Status VerbsEndpoint::init() {
  const VerbsConfig& cfg = dev_->config();
  id_ = dev_->add_client(this);
  desc_ = "verbs " + dev_->name() + " (connecting)";
  TICTAC_RETURN_IF_ERROR(dev_->reserve_cq(kCqEntriesPerSlot * cfg.ring_slots, "a new verbs endpoint"));
  cq_reserved_ = kCqEntriesPerSlot * cfg.ring_slots;
  const QpCaps caps{cfg.ring_slots, cfg.ring_slots};
  // Two send work requests per fragment at most: a zero-copy RDMA WRITE and its ring fragment.
  Result<QueuePair> data = QueuePair::create(api_, dev_->pd(), dev_->cq(), QpCaps{2 * cfg.ring_slots, cfg.ring_slots},
                                             "data QP");
  TICTAC_RETURN_IF_ERROR(data);
  data_qp_ = std::move(data).value();
  Result<QueuePair> ctrl = QueuePair::create(api_, dev_->pd(), dev_->cq(), caps, "control QP");
  TICTAC_RETURN_IF_ERROR(ctrl);
  ctrl_qp_ = std::move(ctrl).value();
  dev_->set_qps(id_, {data_qp_.num(), ctrl_qp_.num()});
  TICTAC_RETURN_IF_ERROR(data_qp_.to_init(dev_->port(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  TICTAC_RETURN_IF_ERROR(ctrl_qp_.to_init(dev_->port(), IBV_ACCESS_LOCAL_WRITE));

  ring_stride_ = kSlotHeaderRoom + cfg.slot_bytes;
  const std::size_t ring_bytes = std::size_t{ring_stride_} * cfg.ring_slots;
  ring_.reset(alloc_pages(ring_bytes));
  if (!ring_) return Status(StatusCode::resource_exhausted, "cannot allocate a receive ring of " + std::to_string(ring_bytes) + " bytes");
  Result<std::shared_ptr<const Registration>> mr = dev_->registrations().acquire(
      ring_.get(), ring_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, "receive ring");
  TICTAC_RETURN_IF_ERROR(mr);
  ring_mr_ = std::move(mr).value();
  TICTAC_RETURN_IF_ERROR(post_recvs(data_qp_, WrKind::data_recv, cfg.ring_slots));

  local_ = dev_->port_info();
  local_.data_qpn = data_qp_.num();
  local_.ctrl_qpn = ctrl_qp_.num();
  local_.ring_addr = reinterpret_cast<std::uintptr_t>(ring_.get());
  local_.ring_rkey = ring_mr_->rkey();
  local_.ring_slots = cfg.ring_slots;
  local_.slot_bytes = cfg.slot_bytes;
  local_.ctrl_recvs = cfg.ring_slots;
  local_.psn = random_psn();
  return Status::Ok();
}

Status VerbsEndpoint::connect(const QpInfo& peer) {
  const VerbsConfig& cfg = dev_->config();
  peer_ = peer;
  peer_stride_ = kSlotHeaderRoom + peer.slot_bytes;
  send_window_ = std::min(peer.ring_slots, data_qp_.caps().max_send_wr / 2);
  ctrl_window_ = std::min(peer.ctrl_recvs, ctrl_qp_.caps().max_send_wr);
  const std::size_t staging_bytes = std::size_t{peer_stride_} * send_window_;
  staging_.reset(alloc_pages(staging_bytes));
  if (!staging_) return Status(StatusCode::resource_exhausted, "cannot allocate a staging ring of " + std::to_string(staging_bytes) + " bytes");
  Result<std::shared_ptr<const Registration>> mr =
      dev_->registrations().acquire(staging_.get(), staging_bytes, IBV_ACCESS_LOCAL_WRITE, "staging ring");
  TICTAC_RETURN_IF_ERROR(mr);
  staging_mr_ = std::move(mr).value();
  TICTAC_RETURN_IF_ERROR(post_recvs(ctrl_qp_, WrKind::ctrl_recv, cfg.ring_slots));
  TICTAC_RETURN_IF_ERROR(data_qp_.to_rtr(dev_->port(), dev_->gid_index(), local_, peer, peer.data_qpn, cfg));
  TICTAC_RETURN_IF_ERROR(ctrl_qp_.to_rtr(dev_->port(), dev_->gid_index(), local_, peer, peer.ctrl_qpn, cfg));
  TICTAC_RETURN_IF_ERROR(data_qp_.to_rts(local_.psn, cfg));
  TICTAC_RETURN_IF_ERROR(ctrl_qp_.to_rts(local_.psn, cfg));
  connected_ = true;
  return Status::Ok();
}

Status VerbsEndpoint::activate(int side_fd, const std::string& local_address, const std::string& peer_address) {
  side_fd_ = side_fd;
  std::ostringstream os;
  os << "verbs " << dev_->name() << " " << local_address << " -> " << peer_address << " (qp 0x" << std::hex
     << data_qp_.num() << " -> 0x" << peer_.data_qpn << ")";
  desc_ = os.str();
  if (closed_) return failure_;  // the peer already vanished
  return dev_->engine().watch(side_fd_, EPOLLIN | EPOLLRDHUP, [this](std::uint32_t ev) { on_side_channel(ev); });
}

VerbsEndpoint::~VerbsEndpoint() {
  close();
  if (flush_call_ != 0) dev_->engine().remove_deferred_call(flush_call_);
  if (credit_call_ != 0) dev_->engine().remove_deferred_call(credit_call_);
}

std::string VerbsEndpoint::peer_qp(std::uint32_t qpn) const {
  std::ostringstream os;
  os << "peer QP 0x" << std::hex << qpn;
  return os.str();
}

Status VerbsEndpoint::protocol_error(const std::string& what) const {
  return Status(StatusCode::protocol_error, "verbs protocol violation by the peer: " + what);
}

void VerbsEndpoint::start(transport::EndpointSink* sink) {
  sink_ = sink;
  started_ = true;
  dev_->engine().defer(lifetime_.guard([this] {
    if (sink_ == nullptr) return;
    if (closed_) {
      if (!failure_.ok()) sink_->on_failed(failure_);
      return;
    }
    const auto self = lifetime_.token();
    while (!early_.empty() && !closed_) {
      const Arrival a = early_.front();
      early_.pop_front();
      deliver(a);
      if (!self.alive()) return;
    }
  }));
}

void VerbsEndpoint::on_completion(const ibv_wc& wc) {
  if (closed_) return;
  if (wc.status != IBV_WC_SUCCESS) {
    const WrKind kind = wr_kind(wc.wr_id);
    const bool data = kind == WrKind::data_send || kind == WrKind::data_recv || kind == WrKind::data_write;
    const std::string what = kind == WrKind::data_send   ? "RDMA WRITE WITH IMMEDIATE into the " + peer_qp(peer_.data_qpn) + "'s receive ring"
                             : kind == WrKind::data_write ? "zero-copy RDMA WRITE into the destination the " + peer_qp(peer_.data_qpn) + " exported"
                             : kind == WrKind::ctrl_send ? "credit SEND WITH IMMEDIATE to the " + peer_qp(peer_.ctrl_qpn)
                             : data                      ? "receive on the data QP from the " + peer_qp(peer_.data_qpn)
                                                         : "receive on the control QP from the " + peer_qp(peer_.ctrl_qpn);
    Status st = wc_status_to_status(api_, wc, what);
    if (wc.status == IBV_WC_WR_FLUSH_ERR) {
      // A flush is the consequence of an earlier error; if that was an async event (QP fatal),
      // report it instead.
      const auto self = lifetime_.token();
      dev_->drain_async_events();
      if (!self.alive() || closed_) return;
      st = Status(StatusCode::connection_lost,
                  st.message() + "; the QP had entered the error state and its outstanding work was flushed",
                  st.origin());
    }
    fail(st);
    return;
  }
  switch (wr_kind(wc.wr_id)) {
    case WrKind::data_send: on_send_done(wr_value(wc.wr_id)); break;
    case WrKind::data_recv: on_fragment(wc); break;
    case WrKind::ctrl_send:
      --ctrl_in_flight_;
      if (credits_owed_ > 0) send_credit();
      break;
    case WrKind::ctrl_recv: on_credit(wc); break;
    case WrKind::data_write:  // never signalled: a success here is a provider bug, harmless
      break;
  }
}

void VerbsEndpoint::on_async_error(const Status& status) { fail(status); }

void VerbsEndpoint::on_side_channel(std::uint32_t events) {
  if (closed_) return;
  char buf[64];
  const ssize_t n = ::recv(side_fd_, buf, sizeof buf, 0);
  if (n > 0) {
    fail(protocol_error("unexpected bytes on the TCP side channel after the handshake"));
    return;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) &&
      (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) == 0) {
    return;
  }
  const int err = n < 0 ? errno : 0;
  // Frames the peer sent before it left may still sit in the CQ: deliver them first.
  const auto self = lifetime_.token();
  dev_->drain();
  if (!self.alive() || closed_) return;
  if (err != 0 && err != EAGAIN) {
    fail(errno_status(StatusCode::connection_lost, "the TCP side channel to the peer failed", "recv", err));
  } else {
    fail(Status(StatusCode::connection_lost,
                "the peer closed the connection (its TCP side channel reached EOF: the peer closed the "
                "endpoint or its process exited)"));
  }
}

void VerbsEndpoint::fail(const Status& status) {
  if (closed_) return;
  failure_ = status;
  TICTAC_LOG(debug) << desc_ << ": " << status.to_string();
  teardown();
  if (sink_ != nullptr && started_) sink_->on_failed(failure_);
}

void VerbsEndpoint::close() {
  if (closed_) return;
  teardown();
}

void VerbsEndpoint::teardown() {
  closed_ = true;
  if (side_fd_ >= 0) {
    dev_->engine().unwatch(side_fd_);
    ::close(side_fd_);
    side_fd_ = -1;
  }
  dev_->remove_client(id_);
  dev_->release_cq(cq_reserved_);
  cq_reserved_ = 0;
  // QPs first (RESET drops their work and CQ entries), then the memory they pointed at.
  data_qp_ = QueuePair();
  ctrl_qp_ = QueuePair();
  ring_mr_.reset();
  staging_mr_.reset();
  ring_.reset();
  staging_.reset();
  cutting_.reset();
  in_flight_.clear();
  pending_wrs_.clear();
  early_.clear();
  in_frame_ = false;
  exports_.clear();  // after the QPs: the peer can no longer write into these buffers
  remote_exports_.clear();
}

}  // namespace tictac::verbs
