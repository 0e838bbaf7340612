// UcxWorker: the one UCP worker of a ProgressEngine (internal to the UCX backend).
//
// Progress: the worker's event fd (ucp_worker_get_efd) is watched by the engine's epoll. A "pump"
// calls ucp_worker_progress until it reports nothing, running after each call the work that UCX
// callbacks queued with later() (frame delivery, accepted connections, completions: sinks are
// never called from inside a UCX callback). Operations started outside a pump (post, connect,
// close) call kick(), which schedules a pump in the current loop iteration. A pump that keeps
// finding work yields to the loop after a bounded number of rounds. The worker is also one of the
// engine's pollers: while the loop spins (TICTAC_SPIN_US) each round runs a pump inline.
// Arming (ucp_worker_arm; UCS_ERR_BUSY means more events: pump again) happens only where the
// loop would block: in the engine's before-sleep hook, and in a pump the event fd woke (an armed
// fd is no longer readable). A spinning ping-pong makes no arm calls (each one is a syscall that
// drains UCX's event fd: one or two per message before).
//
// Threading: loop thread only (the worker is created in UCS_THREAD_MODE_SERIALIZED: the loop
// thread is its only user). Ownership: owns the ucp_worker_h and the close requests of endpoints
// it closes; borrows the registered endpoints (they unregister before they go away). The
// destructor progresses pending closes for a bounded time, then destroys the worker.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transport/progress_engine.h"
#include "transport/scaffold/lifetime.h"
#include "transport/ucx/ucp_context.h"

namespace tictac::transport::ucx {

class UcxEndpoint;

class UcxWorker {
 public:
  static Result<std::unique_ptr<UcxWorker>> create(ProgressEngine& engine,
                                                   std::shared_ptr<UcpContext> context);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_worker_h handle() const { return worker_; }
  ProgressEngine& engine() const { return engine_; }
  const UcpContext& context() const { return *context_; }
  // Frames with at most this many payload bytes are sent eagerly (TICTAC_UCX_RNDV_THRESH).
  std::uint64_t rndv_threshold() const { return rndv_threshold_; }

  // Frames, completions and errors of `ep` go to `owner` until unregister_ep(); returns the
  // owner's serial number (completions name owners by serial, so a late one finds nobody).
  std::uint64_t register_ep(ucp_ep_h ep, UcxEndpoint* owner);
  void unregister_ep(ucp_ep_h ep, std::uint64_t serial);
  UcxEndpoint* find(std::uint64_t serial) const;
  // Starts closing `ep` (force: without flushing, as required after an error); the worker keeps
  // the close request until it completes. A close without force says goodbye first: it sends a
  // goodbye active message and closes once the peer's worker acknowledges it, or after
  // kGoodbyeWait, or at once if the endpoint fails meanwhile. The peer acknowledges after UCX has
  // handed it every frame sent before the goodbye (one lane, in order), so frames whose sends
  // completed are in the peer's hands before it sees the disconnect. Without it, over shared
  // memory, a completed send only meant the frame was in the peer's FIFO, and a peer that handled
  // the disconnect first never read it (docs/ucx.md, "Failure handling").
  void close_ep(ucp_ep_h ep, bool force);
  // At shutdown (the loop is about to stop): progresses UCX, and nothing else, until every
  // goodbye is acknowledged or has waited kGoodbyeWait, acknowledging the peers' goodbyes, so the
  // endpoints' closes start before the loop stops (a peer would otherwise see the disconnect only
  // when the worker is destroyed); then until those closes complete, all within kCloseDrain. A
  // close completes only once the peer's worker answers the disconnect, and two peers that close
  // at the same time each answer from here. Left to the destructor, with the loops already
  // stopped, the one destroyed first had nobody answering it and waited the full kCloseDrain.
  // Bounded once per worker: a second call (the destructor's) waits only what is left of it.
  void finish_closing_now();
  static constexpr std::chrono::milliseconds kCloseDrain{2000};

  // ucp_ep_params_t.err_handler for every endpoint of this worker (arg = the worker): routes a
  // peer failure (UCP_ERR_HANDLING_MODE_PEER) to the registered owner.
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  // Runs `task` after the current ucp_worker_progress() call returns (or in the next pump).
  void later(Task task);
  // later() of the delivery of the endpoint registered under `serial` (UcxEndpoint::run_delivery),
  // skipped if it is gone by then; allocates nothing.
  void later_deliver(std::uint64_t serial);
  // Schedules a pump in the current loop iteration (no-op inside a pump: it loops until idle).
  void kick();

  // The ucp_request_param_t fields every operation sets: memory type (host) stated explicitly.
  static constexpr ucs_memory_type_t kMemoryType = UCS_MEMORY_TYPE_HOST;
  static constexpr unsigned kAmId = 0x7C;  // tictac frames
  // Goodbye and its acknowledgement (close_ep): a one-byte header, kGoodbye or kGoodbyeAck.
  static constexpr unsigned kGoodbyeAmId = 0x7D;
  static constexpr std::chrono::milliseconds kGoodbyeWait{1000};

 private:
  UcxWorker(ProgressEngine& engine, std::shared_ptr<UcpContext> context, ucp_worker_h worker,
            int efd, std::uint64_t rndv_threshold);
  // Progresses until idle; `arm`: then arm the worker (the pump the event fd woke: an armed fd is
  // no longer readable). True when it found work (or yielded with work left).
  bool pump(bool arm);
  // ucp_worker_arm unless armed since the last work or operation; false = not armed: events
  // arrived meanwhile (progress again) or arming failed (logged once; arm_failed_: poll instead).
  bool arm();
  // The engine's poller: a pump run inline (idle: one ucp_worker_progress); true when it found
  // work. It never arms: before_sleep() does, once, when the loop is about to block.
  bool poll();
  // The engine's before-sleep hook: arms; true (and a pump kicked) if work is pending, later()
  // callbacks included.
  bool before_sleep();
  bool run_later();
  static ucs_status_t on_am(void* arg, const void* header, size_t header_length, void* data,
                            size_t length, const ucp_am_recv_param_t* param);
  static void on_close_done(void* request, ucs_status_t status, void* user_data);
  static ucs_status_t on_goodbye_am(void* arg, const void* header, size_t header_length, void* data,
                                    size_t length, const ucp_am_recv_param_t* param);
  static void on_goodbye_sent(void* request, ucs_status_t status, void* user_data);
  // ucp_ep_close_nbx now; the worker keeps the request.
  void close_now(ucp_ep_h ep, bool force);
  // Sends a goodbye (or its acknowledgement, `ack`) on `ep`; false if UCX refused at once.
  bool send_goodbye(ucp_ep_h ep, bool ack);
  // Acknowledges the goodbyes that arrived (acks_due_) on endpoints still open here.
  void send_acks();
  // Closes the endpoints whose goodbye was acknowledged or has waited kGoodbyeWait.
  void finish_goodbyes();

  ProgressEngine& engine_;
  std::shared_ptr<UcpContext> context_;
  ucp_worker_h worker_;
  int efd_;
  ProgressEngine::PollerId poller_ = 0;
  const std::uint64_t rndv_threshold_;
  bool in_pump_ = false;
  bool pump_scheduled_ = false;
  bool retry_timer_set_ = false;
  std::optional<Clock::time_point> drain_start_;  // the first finish_closing_now()
  bool arm_failed_ = false;  // logged once
  bool armed_ = false;       // ucp_worker_arm succeeded and no work was found since
  struct Later {
    Task task;                         // or, when empty:
    std::uint64_t deliver_serial = 0;  // the endpoint whose delivery runs
  };
  std::vector<Later> later_;
  std::vector<Later> later_spare_;                // run_later()'s batch, kept for its capacity
  ProgressEngine::DeferredCallId pump_call_ = 0;  // kick()'s deferred pump, registered once
  std::uint64_t next_serial_ = 1;
  std::unordered_map<ucp_ep_h, UcxEndpoint*> by_ep_;
  std::unordered_map<std::uint64_t, UcxEndpoint*> by_serial_;
  std::unordered_set<void*> closing_;
  struct Goodbye {
    Clock::time_point deadline;
    bool acked = false;
  };
  // Endpoints that said goodbye and wait for the acknowledgement (unregistered already).
  std::unordered_map<ucp_ep_h, Goodbye> goodbyes_;
  std::vector<ucp_ep_h> acks_due_;  // goodbyes received, to acknowledge outside UCX callbacks
  std::unordered_set<ucp_ep_h> peer_left_;  // open endpoints whose peer said goodbye
  scaffold::LoopLifetime lifetime_;  // pumps check it after running queued work
};

}  // namespace tictac::transport::ucx
