// CudaPath: routes device-buffer sends and receives through the transport core (loop side).
//
// Submission (enqueue_at_submit, on the caller's thread inside Context::submit, before send()/
// recv() return): a send's producer gate event is recorded on its stream and a receive's consumer
// stream wait is enqueued there, so both are ordered exactly at the call: work the user enqueues
// afterwards is neither waited for by the send nor run before the receive's bytes landed. When a
// pool is empty at that moment (resource_exhausted) the loop enqueues it later instead (the
// guarantee then weakens to "ordered when the loop took the request"; raise TICTAC_CUDA_EVENTS or
// TICTAC_CUDA_STREAM_FLAGS).
//
// A device request (the user's Request, owned by the Core like any other) is carried by an inner
// host-side Request that the Core sends or receives on its normal path; the inner one's callback
// drives the device one. Per request:
//   direct send   (the peer's backend has Capabilities::cuda_memory): the SendGate event
//                 recorded at submission; the request waits in waiting_for_stream and the inner
//                 send (same device pointer) is submitted only once the gate released it.
//   staged send   (tcp, UCX without CUDA): once the gate released it, StagingPool copies the
//                 buffer in staging-buffer pieces (copy_to_host_after_gate; without a gate from
//                 submission, copy_to_host ordered after the producer stream); each piece lands in a
//                 host shadow of the message and its staging buffer is released; the inner send
//                 (from the shadow) is submitted after the last piece.
//   receive       StreamCompletion::wait_on_stream (at submission) makes the consumer stream wait; the
//                 inner receive lands in the device buffer (direct) or in a host shadow (staged,
//                 and on a direct backend when the message arrived before the receive), whose
//                 bytes are then copied up in pieces (copy_to_device on the side stream).
//                 The stream is released (complete()) only after the last byte is on the device.
//   failure       a receive whose arrival timed out (TICTAC_CUDA_ARRIVAL_TIMEOUT), was cancelled,
//                 or whose peer failed is released with the error sentinel (never a hanging
//                 stream); a timeout also marks its endpoint failed. Gated and copying sends of a
//                 failed peer complete with the peer's status.
// Staged transfers hold a host shadow of the whole message (not pipelined per chunk).
// Order: sends to one (peer, tag) are announced in submission order: a send (device or host)
// submitted while an earlier device send to the same key is not yet handed to the core waits
// behind it here (hold_send), so the receiver matches them in the order they were sent.
// Polling: poll() (a loop timer) queries events and flags only; it spins while copies or gates
// are pending (backing off to 1 ms when nothing moved) and otherwise sleeps until the next
// arrival deadline. Loop-thread only; never calls a blocking CUDA function (the pools are made by
// CudaDevices::prepare on the user's thread before a request reaches the loop).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "cuda/api.h"
#include "cuda/stream_completion.h"
#include "transport/cuda_devices.h"
#include "transport/progress_engine.h"
#include "transport/request.h"

namespace tictac::transport {

// Where a device request's buffer lives: its device and the stream ordering it, and what
// enqueue_at_submit already enqueued on that stream.
struct DeviceRoute {
  int device = 0;
  cuda::Stream stream = nullptr;
  std::uint64_t gate_id = 0;                  // send: its SendGate id; 0 = none yet
  std::optional<cuda::ArrivalTicket> ticket;  // receive: its stream wait; empty = none yet
};

// Caller's thread, in Context::submit (the device prepared): enqueues a send's producer gate or a
// receive's consumer stream wait into `route` (under dev.mutex). An empty pool leaves `route`
// without it (the loop retries); other errors come back (cuda_error, naming the step) and
// nothing was enqueued. What it enqueued must reach CudaPath::send/recv or CudaPath::drop.
Status enqueue_at_submit(CudaDevice& dev, bool send, DeviceRoute& route);

// What the CudaPath needs from the Core.
class CudaPathHost {
 public:
  virtual ~CudaPathHost() = default;
  // Submits an inner host-side request on the normal path (it completes via its own callback).
  virtual void submit_inner(std::unique_ptr<Request> req) = 0;
  virtual void cancel_inner(RequestId id) = 0;
  // Completes the user's device request (owned by the Core).
  virtual void finish_user(Request* req, const Status& status, std::uint64_t bytes, PeerId source) = 0;
  // Fails the connection to `peer` with `why`: all of its requests complete with it.
  virtual void fail_peer(PeerId peer, const Status& why) = 0;
  // Completes a receive still waiting for a match with `why`; false if it is matched already.
  virtual bool abort_unmatched(RequestId id, const Status& why) = 0;
  // Whether the backend(s) a transfer with `peer` (kAnyPeer: any attached backend) may use read
  // and write device memory directly.
  virtual bool device_memory_ok(PeerId peer) const = 0;
  // Whether a receive posted now would match a message that arrived before it (its eager bytes
  // sit in a host pool that the connection copies with memcpy: such a receive lands in a host
  // shadow even on a direct backend).
  virtual bool has_unexpected(PeerId peer, Tag tag) const = 0;
};

class CudaPath {
 public:
  CudaPath(ProgressEngine& engine, CudaDevices& devices, CudaPathHost& host)
      : engine_(engine), devices_(devices), host_(host) {}
  ~CudaPath();
  CudaPath(const CudaPath&) = delete;
  CudaPath& operator=(const CudaPath&) = delete;

  // The user's request (already in the Core's table, state queued) for a device buffer.
  void send(Request* user, const DeviceRoute& route);
  void recv(Request* user, const DeviceRoute& route);
  // A request that will never reach send()/recv() (the core is closed): releases what
  // enqueue_at_submit enqueued (the stream wait with the error sentinel).
  void drop(const DeviceRoute& route);
  // A host send about to enter the core: takes it (true) when an earlier device send to the same
  // (peer, tag) is still waiting for its stream or its copies; it is submitted after that one.
  bool hold_send(std::unique_ptr<Request>& req);
  // true when `id` is a device request or a held host send (it completes as cancelled, or
  // normally if its bytes are already being copied to the device).
  bool cancel(RequestId id);
  // An inner receive was bound to a message of `peer`.
  void on_bound(RequestId inner, PeerId peer);
  // `peer`'s connection failed: its gated or copying sends complete with `why`.
  void peer_failed(PeerId peer, const Status& why);
  // Completes every device request with `why` (streams released with the sentinel).
  void close(const Status& why);
  bool idle() const { return entries_.empty() && copies_.empty(); }

 private:
  // start: waiting for a gate event or a flag (pool empty); releasing: the consumer stream
  // release waits for a pooled event (fallback mode).
  enum class Phase : std::uint8_t { start, gated, to_host, inner, to_device, releasing };
  struct Entry {
    Request* user = nullptr;
    DeviceRoute route;
    CudaDevice* dev = nullptr;
    bool send = false;
    bool staged = false;
    bool after_gate = false;  // a staged send gated at submission: its copies wait for no stream
    Phase phase = Phase::start;
    std::uint64_t gate_id = 0;
    std::optional<cuda::ArrivalTicket> ticket;  // receives, until released
    Clock::time_point deadline{};
    Shadow shadow;  // staged: the host copy of the message (from the device's ShadowPool)
    RequestId inner_id = 0;
    PeerId bound = kNoPeer;
    PeerId source = kNoPeer;
    std::uint64_t total = 0;    // bytes to copy
    std::uint64_t issued = 0;   // bytes whose copy was enqueued
    std::uint64_t copied = 0;   // bytes whose copy finished
    bool ready = false;         // send: may be handed to the core once it heads its key's order
  };
  using OrderKey = std::pair<PeerId, Tag>;
  struct Waiting {
    RequestId id = 0;
    std::unique_ptr<Request> host;  // a held host send; null for a device send (in entries_)
  };
  struct CopyRef {
    RequestId user = 0;
    std::uint64_t offset = 0;
  };
  using DevKey = std::pair<CudaDevice*, std::uint64_t>;

  void add(Request* user, const DeviceRoute& route, bool send);
  void start(RequestId id, Entry& e);
  // A staged send copies its buffer to a host shadow (then ready_to_send).
  void start_copies(RequestId id, Entry& e);
  // A send's producer gate released it: copies (staged) or ready_to_send (direct).
  void gate_released(RequestId id, Entry& e);
  // A device send is ready to be announced: hands it (and what waits behind it) to the core in
  // submission order.
  void ready_to_send(RequestId id, Entry& e);
  void drain(const OrderKey& key);
  // Completes held host sends matching `pred` with `why`.
  template <typename Pred>
  void drop_held(Pred pred, const Status& why);
  void submit_inner_recv(RequestId id, Entry& e);
  void submit_inner(RequestId id, Entry& e, RequestKind kind);
  // One staging copy of e's next piece (send: device -> host; receive: host -> device).
  Result<std::uint64_t> copy_piece(Entry& e, std::size_t n);
  void on_inner_done(RequestId id, const Status& status, std::uint64_t bytes, PeerId source);
  void issue_copies(RequestId id, Entry& e);
  void on_copy_done(const cuda::StagingDone& done, CudaDevice* dev);
  void arrived(RequestId id, Entry& e);
  // Completes the user's request and forgets it; a receive's stream still waiting is released
  // with the error sentinel first.
  void finish(RequestId id, const Status& status, std::uint64_t bytes, PeerId source);
  void on_timeout(RequestId id, const cuda::ArrivalFailure& failure);
  void poll();
  void schedule_poll();
  bool busy() const;
  void touch(CudaDevice* dev);

  ProgressEngine& engine_;
  CudaDevices& devices_;
  CudaPathHost& host_;
  std::unordered_map<RequestId, Entry> entries_;       // by the user's request id
  std::unordered_map<RequestId, RequestId> by_inner_;  // inner id -> user id
  std::map<DevKey, RequestId> gates_;
  std::map<DevKey, CopyRef> copies_;                   // staging copies in flight
  std::map<DevKey, RequestId> tickets_;
  std::map<OrderKey, std::deque<Waiting>> order_;  // sends per key, in submission order
  std::set<OrderKey> draining_;
  bool bypass_ = false;  // drain() is handing a held host send to the core
  std::vector<CudaDevice*> touched_;
  RequestId next_inner_ = RequestId{1} << 62;  // disjoint from the Context's ids
  bool poll_scheduled_ = false;
  ProgressEngine::TimerId poll_timer_ = 0;
  Clock::time_point poll_at_{};
  unsigned idle_polls_ = 0;
};

}  // namespace tictac::transport
