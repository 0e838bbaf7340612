// UcxEndpoint: one UCP endpoint (client-server, peer error handling) carrying tictac frames as
// UCP active messages (internal to the UCX backend).
//
// Wire: one AM per frame; the AM header is the 56-byte wire::Header (tag, msg_id, offset,
// priority ... validated by wire::decode), the AM data is the frame's payload. Every AM is sent
// with UCP_AM_SEND_FLAG_REPLY so the receiver learns which endpoint it came from. Small payloads
// travel eagerly and are copied once from UCX's buffer into the Destination; large ones use UCX
// rendezvous and land straight in the Destination (ucp_am_recv_data_nbx). Frames are handed to
// the sink strictly in arrival order, one payload at a time (the sink's contract), so a frame
// that arrives while a rendezvous payload is landing waits, holding UCX's descriptor.
// Memory type: host, stated explicitly on every operation.
// Failure: UCX's peer error callback, a failed send or receive, or a bad header make the endpoint
// fail once: frames that arrived before (up to a progress round that brings none) are delivered
// first, then on_failed(connection_lost or protocol_error) with UCX's reason and the peer's
// address.
//
// Threading: loop thread only; UCX callbacks only queue work (see worker.h). Ownership: owns the
// ucp_ep_h; close() hands it to the worker to close: with a flush when the endpoint is healthy and
// every send has completed (frames UCX still buffers reach the peer), forced otherwise (unsent
// frames are dropped). Either way no payload buffer is touched after close() returns, and the
// peer sees the disconnect.
#pragma once

#include <ucp/api/ucp.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/backend.h"
#include "transport/scaffold/lifetime.h"
#include "transport/ucx/worker.h"

namespace tictac::transport::ucx {

class UcxEndpoint final : public Endpoint {
 public:
  // Takes ownership of `ep` (created with UcxWorker::on_ep_error as its error handler).
  UcxEndpoint(UcxWorker& worker, ucp_ep_h ep, std::string local, std::string remote);
  ~UcxEndpoint() override;

  void start(EndpointSink* sink) override;
  bool has_capacity() const override;
  Status post(const wire::Header& header, const std::byte* payload, std::uint64_t cookie) override;
  void close() override;
  std::string describe() const override;

  ucp_ep_h handle() const { return ep_; }
  // Before start(): `hook` is called (outside UCX callbacks) if the endpoint fails; the connector
  // uses it to retry. Cleared by start().
  void set_failure_hook(std::function<void(const Status&)> hook) { failure_hook_ = std::move(hook); }

  // --- from UCX callbacks, through the worker: queue only ---
  ucs_status_t on_am(const void* header, std::size_t header_length, void* data, std::size_t length,
                     std::uint64_t recv_attr);
  void on_error(ucs_status_t status);
  // The delivery schedule_delivery() queued (UcxWorker::later_deliver): runs it now.
  void run_delivery() {
    delivery_scheduled_ = false;
    deliver();
  }

 private:
  struct Incoming {
    wire::Header header;
    Status error;                 // the AM could not be decoded
    void* desc = nullptr;         // held eager data or a rendezvous descriptor
    bool rndv = false;
    std::vector<std::byte> copy;  // eager data UCX could not let us hold
  };
  struct SendOp {
    UcxWorker* worker;
    std::uint64_t serial;
    std::uint64_t cookie;
    wire::HeaderBytes header;
  };
  struct RecvOp {
    UcxWorker* worker;
    std::uint64_t serial;
  };

  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_recv_done(void* request, ucs_status_t status, std::size_t length, void* user_data);
  void send_done(std::uint64_t cookie, ucs_status_t status);
  void recv_done(ucs_status_t status);
  void fail_later(const Status& status);
  void schedule_delivery();
  void deliver();
  // Hands the head of in_ to the sink; false when it must wait (a payload is landing).
  bool deliver_one();
  void fail(const Status& status);
  // close() with the mode chosen: flush (deliver what UCX still holds) or force.
  void close_now(bool flush);
  void release(Incoming& in);

  UcxWorker& worker_;
  ucp_ep_h ep_;
  std::uint64_t serial_;
  mutable std::string local_;
  const std::string remote_;
  EndpointSink* sink_ = nullptr;
  bool closed_ = false;
  bool started_ = false;
  bool delivery_scheduled_ = false;
  bool was_full_ = false;
  Status failure_;  // first failure, delivered after the frames that arrived before it
  std::function<void(const Status&)> failure_hook_;
  std::size_t in_flight_ = 0;
  std::vector<std::uint64_t> sent_;  // completed cookies not yet reported
  std::deque<Incoming> in_;
  // The frame whose rendezvous payload is landing.
  bool receiving_ = false;
  bool received_ = false;
  wire::Header landing_;
  std::vector<std::byte> scratch_;  // destination of a discarded rendezvous payload
  // Frames seen by on_am, and the count when a failure last waited one more progress round.
  std::uint64_t frames_arrived_ = 0;
  std::uint64_t frames_at_drain_ = ~std::uint64_t{0};
  int failure_drain_rounds_ = 0;
  scaffold::LoopLifetime lifetime_;  // queued work and sink callbacks check it
};

}  // namespace tictac::transport::ucx
