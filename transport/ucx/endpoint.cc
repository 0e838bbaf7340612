#include "transport/ucx/endpoint.h"

#include <cstring>
#include <span>

#include "transport/ucx/address.h"
#include "transport/ucx/ucs_status.h"

namespace tictac::transport::ucx {
namespace {
constexpr std::size_t kMaxInFlight = 256;  // frames posted and not yet completed, per endpoint
// Progress rounds a failure waits, at most, for frames the peer sent before it (see deliver()).
constexpr int kMaxFailureDrainRounds = 64;
}  // namespace

UcxEndpoint::UcxEndpoint(UcxWorker& worker, ucp_ep_h ep, std::string local, std::string remote)
    : worker_(worker), ep_(ep), serial_(worker.register_ep(ep, this)), local_(std::move(local)),
      remote_(std::move(remote)) {}

UcxEndpoint::~UcxEndpoint() { close(); }

std::string UcxEndpoint::describe() const {
  if (local_.empty() && !closed_) {
    ucp_ep_attr_t attr{};
    attr.field_mask = UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR;
    if (ucp_ep_query(ep_, &attr) == UCS_OK) local_ = format_address(attr.local_sockaddr);
  }
  return "ucx " + (local_.empty() ? std::string("?") : local_) + " -> " + remote_;
}

void UcxEndpoint::start(EndpointSink* sink) {
  sink_ = sink;
  started_ = true;
  failure_hook_ = nullptr;
  schedule_delivery();  // frames (or a failure) that arrived before start()
}

bool UcxEndpoint::has_capacity() const { return !closed_ && failure_.ok() && in_flight_ < kMaxInFlight; }

Status UcxEndpoint::post(const wire::Header& header, const std::byte* payload, std::uint64_t cookie) {
  if (closed_) return Status(StatusCode::connection_lost, "connection closed");
  if (!failure_.ok()) return failure_;
  if (in_flight_ >= kMaxInFlight) {
    was_full_ = true;
    return Status(StatusCode::resource_exhausted, "no capacity: too many frames in flight on the UCX endpoint");
  }
  auto* op = new SendOp{&worker_, serial_, cookie, wire::encode(header)};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
                   UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.flags = UCP_AM_SEND_FLAG_REPLY;  // the receiver learns which endpoint this came from
  // Up to the threshold, eager even where UCX would pick rendezvous: the sink takes one payload
  // at a time, so rendezvous round trips cannot overlap (see worker.h, TICTAC_UCX_RNDV_THRESH).
  if (header.length <= worker_.rndv_threshold()) p.flags |= UCP_AM_SEND_FLAG_EAGER;
  p.cb.send = &UcxEndpoint::on_send_done;
  p.user_data = op;
  p.memory_type = UcxWorker::kMemoryType;
  const ucs_status_ptr_t r = ucp_am_send_nbx(ep_, UcxWorker::kAmId, op->header.data(), op->header.size(),
                                             payload, header.length, &p);
  ++in_flight_;
  if (r == nullptr) {  // done already; reported from the next pump, never from inside post()
    delete op;
    send_done(cookie, UCS_OK);
  } else if (UCS_PTR_IS_ERR(r)) {
    delete op;
    --in_flight_;
    return from_ucs(StatusCode::connection_lost, "UCX cannot send to " + remote_, UCS_PTR_STATUS(r));
  }
  worker_.kick();  // pending sends need progress
  if (in_flight_ >= kMaxInFlight) was_full_ = true;
  return Status::Ok();
}

void UcxEndpoint::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<SendOp*>(user_data);
  if (UcxEndpoint* ep = op->worker->find(op->serial)) ep->send_done(op->cookie, status);
  delete op;
  ucp_request_free(request);
}

void UcxEndpoint::send_done(std::uint64_t cookie, ucs_status_t status) {
  --in_flight_;
  if (status != UCS_OK) {
    fail_later(from_ucs(StatusCode::connection_lost, "sending a frame to " + remote_ + " over UCX failed", status));
    return;
  }
  sent_.push_back(cookie);
  schedule_delivery();
}

void UcxEndpoint::on_recv_done(void* request, ucs_status_t status, std::size_t, void* user_data) {
  auto* op = static_cast<RecvOp*>(user_data);
  if (UcxEndpoint* ep = op->worker->find(op->serial)) ep->recv_done(status);
  delete op;
  ucp_request_free(request);
}

void UcxEndpoint::recv_done(ucs_status_t status) {
  if (status != UCS_OK) {
    fail_later(from_ucs(StatusCode::connection_lost,
                        "receiving a rendezvous payload from " + remote_ + " over UCX failed", status));
    return;
  }
  received_ = true;
  schedule_delivery();
}

ucs_status_t UcxEndpoint::on_am(const void* header, std::size_t header_length, void* data, std::size_t length,
                                std::uint64_t recv_attr) {
  if (closed_) return UCS_OK;
  Incoming in;
  if (header_length != wire::kHeaderBytes) {
    in.error = Status(StatusCode::protocol_error, "active message from " + remote_ + " has a " +
                                                      std::to_string(header_length) + "-byte header, expected " +
                                                      std::to_string(wire::kHeaderBytes));
  } else {
    Result<wire::Header> h = wire::decode(std::span(static_cast<const std::byte*>(header), header_length));
    if (!h.ok()) {
      in.error = h.status();
    } else if (h->length != length) {
      in.error = Status(StatusCode::protocol_error, "active message from " + remote_ + " carries " +
                                                        std::to_string(length) + " payload bytes but its header says " +
                                                        std::to_string(h->length));
    } else {
      in.header = *h;
    }
  }
  ucs_status_t keep = UCS_OK;
  if (in.error.ok() && length > 0) {
    if ((recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
      in.desc = data;
      in.rndv = true;
      keep = UCS_INPROGRESS;
    } else if ((recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0) {
      in.desc = data;
      keep = UCS_INPROGRESS;
    } else {
      const auto* p = static_cast<const std::byte*>(data);
      in.copy.assign(p, p + length);
    }
  }
  in_.push_back(std::move(in));
  ++frames_arrived_;
  schedule_delivery();
  return keep;
}

void UcxEndpoint::on_error(ucs_status_t status) {
  fail_later(from_ucs(StatusCode::connection_lost,
                      "UCX reports the connection to " + remote_ + " as failed (peer gone?)", status));
}

void UcxEndpoint::fail_later(const Status& status) {
  if (!failure_.ok() || closed_) return;
  failure_ = status;
  schedule_delivery();
}

void UcxEndpoint::schedule_delivery() {
  if (delivery_scheduled_ || closed_) return;
  delivery_scheduled_ = true;
  worker_.later_deliver(serial_);
  worker_.kick();
}

void UcxEndpoint::deliver() {
  if (closed_) return;
  if (!started_) {
    if (!failure_.ok() && failure_hook_) {
      auto hook = std::move(failure_hook_);
      failure_hook_ = nullptr;
      hook(failure_);
    }
    return;
  }
  const auto self = lifetime_.token();
  std::vector<std::uint64_t> sent;
  sent.swap(sent_);
  for (std::uint64_t cookie : sent) {
    sink_->on_sent(cookie);
    if (!self.alive() || closed_) return;
  }
  if (sent_.empty()) {  // give the storage back: steady sending then allocates nothing here
    sent.clear();
    sent_.swap(sent);
  }
  if (was_full_ && failure_.ok() && in_flight_ < kMaxInFlight) {
    was_full_ = false;
    sink_->on_writable();
    if (!self.alive() || closed_) return;
  }
  if (received_) {
    received_ = false;
    receiving_ = false;
    scratch_ = {};
    sink_->on_frame(landing_);
    if (!self.alive() || closed_) return;
  }
  while (!receiving_ && !in_.empty()) {
    const bool more = deliver_one();
    if (!self.alive() || closed_) return;
    if (!more) break;
  }
  if (!failure_.ok()) {
    // Reported (and the endpoint closed) only after a progress round that brought no frame:
    // active messages UCX hands over after its error callback are still delivered, where a
    // closed endpoint's would be dropped. Frames still in a shared-memory FIFO when UCX tears
    // the failed endpoint down are not covered here: a healthy close's goodbye covers them
    // (UcxWorker::close_ep; docs/ucx.md, "Failure handling").
    if (!receiving_ && frames_arrived_ != frames_at_drain_ &&
        failure_drain_rounds_ < kMaxFailureDrainRounds) {
      frames_at_drain_ = frames_arrived_;
      ++failure_drain_rounds_;
      schedule_delivery();  // runs after the next ucp_worker_progress() (UcxWorker::later)
      return;
    }
    fail(failure_);
  }
}

bool UcxEndpoint::deliver_one() {
  Incoming in = std::move(in_.front());
  in_.pop_front();
  if (!in.error.ok()) {
    release(in);
    fail(in.error);
    return false;
  }
  const wire::Header h = in.header;
  UcxWorker& worker = worker_;  // outlives this endpoint
  const auto self = lifetime_.token();
  Result<Destination> d = sink_->on_header(h);
  if (!self.alive() || closed_) {
    if (in.desc != nullptr) ucp_am_data_release(worker.handle(), in.desc);
    return false;
  }
  if (!d.ok()) {
    release(in);
    fail(d.status());
    return false;
  }
  const std::size_t n = h.length;
  if (n > 0 && !in.rndv) {
    const std::byte* src = in.desc != nullptr ? static_cast<const std::byte*>(in.desc) : in.copy.data();
    if (!d->discard) std::memcpy(d->data, src, n);
    release(in);
  } else if (n > 0) {
    std::byte* dst = d->data;
    if (d->discard) {
      scratch_.resize(n);
      dst = scratch_.data();
    }
    auto* op = new RecvOp{&worker_, serial_};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.cb.recv_am = &UcxEndpoint::on_recv_done;
    p.user_data = op;
    p.memory_type = UcxWorker::kMemoryType;
    void* desc = in.desc;
    in.desc = nullptr;  // UCX owns the descriptor from here on, whatever happens
    landing_ = h;
    receiving_ = true;
    const ucs_status_ptr_t r = ucp_am_recv_data_nbx(worker_.handle(), desc, dst, n, &p);
    if (UCS_PTR_IS_ERR(r)) {
      delete op;
      fail(from_ucs(StatusCode::connection_lost, "cannot receive a rendezvous payload from " + remote_,
                    UCS_PTR_STATUS(r)));
      return false;
    }
    if (r != nullptr) {
      worker_.kick();
      return false;  // recv_done() resumes delivery
    }
    delete op;
    receiving_ = false;
    scratch_ = {};
  }
  sink_->on_frame(h);
  return true;
}

void UcxEndpoint::release(Incoming& in) {
  if (in.desc != nullptr) ucp_am_data_release(worker_.handle(), in.desc);
  in.desc = nullptr;
}

void UcxEndpoint::fail(const Status& status) {
  if (closed_) return;
  close_now(/*flush=*/false);
  if (sink_ != nullptr) sink_->on_failed(status);
}

// A healthy endpoint whose every send has completed is closed with a flush: UCX delivers the
// frames it still holds (a completed eager send may sit in UCX's or the kernel's buffers; a forced
// close would drop them, and a peer waiting for its last messages would see the connection lost:
// the chaos suite's lossy link showed it). It references no payload buffer, so close() still
// touches none after it returns. Anything else (an error, sends still in flight) is forced: a
// flushing close could wait for a peer that never progresses, and in-flight sends reference the
// caller's buffers. The worker bounds how long it waits for either at destruction.
void UcxEndpoint::close() { close_now(/*flush=*/failure_.ok() && in_flight_ == 0); }

void UcxEndpoint::close_now(bool flush) {
  if (closed_) return;
  closed_ = true;
  for (Incoming& in : in_) release(in);
  in_.clear();
  sent_.clear();
  // The peer learns of it either way: UCX's connection manager disconnects, and its endpoint fails.
  worker_.unregister_ep(ep_, serial_);
  worker_.close_ep(ep_, /*force=*/!flush);
}

}  // namespace tictac::transport::ucx
