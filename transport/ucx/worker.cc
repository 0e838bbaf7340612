#include "transport/ucx/worker.h"

#include <sys/epoll.h>

#include <algorithm>

#include "common/log.h"
#include "common/tunables.h"
#include "transport/ucx/endpoint.h"
#include "transport/ucx/ucs_status.h"

namespace tictac::transport::ucx {
namespace {

const SizeTunable kRndvThresh{
    "TICTAC_UCX_RNDV_THRESH", 1 << 20,
    "UCX backend: frames with payloads up to this many bytes are sent eagerly "
    "(copied once at the receiver); larger ones use UCX rendezvous (zero-copy "
    "into the destination, one round trip per frame)"};

constexpr int kMaxRounds = 256;  // progress calls per pump before yielding

}  // namespace

Result<std::unique_ptr<UcxWorker>> UcxWorker::create(ProgressEngine& engine,
                                                     std::shared_ptr<UcpContext> context) {
  Result<std::uint64_t> rndv = kRndvThresh.get();
  TICTAC_RETURN_IF_ERROR(rndv);
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_NAME;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  params.name = "tictac-loop";
  ucp_worker_h worker = nullptr;
  ucs_status_t st = ucp_worker_create(context->handle(), &params, &worker);
  if (st != UCS_OK) return from_ucs(StatusCode::unavailable, "cannot create a UCP worker", st);
  int efd = -1;
  st = ucp_worker_get_efd(worker, &efd);
  if (st != UCS_OK) {
    ucp_worker_destroy(worker);
    return from_ucs(StatusCode::unavailable, "the UCP worker has no event fd (UCP_FEATURE_WAKEUP)",
                    st);
  }
  std::unique_ptr<UcxWorker> w(new UcxWorker(engine, std::move(context), worker, efd, *rndv));
  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                  UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  am.id = kAmId;
  // Whole messages only; eager data may be held past the callback (delivered after progress).
  am.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
  am.cb = &UcxWorker::on_am;
  am.arg = w.get();
  st = ucp_worker_set_am_recv_handler(worker, &am);
  if (st != UCS_OK)
    return from_ucs(StatusCode::unavailable, "cannot install the active message handler", st);
  ucp_am_handler_param_t bye{};
  bye.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                   UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  bye.id = kGoodbyeAmId;
  bye.flags = UCP_AM_FLAG_WHOLE_MSG;
  bye.cb = &UcxWorker::on_goodbye_am;
  bye.arg = w.get();
  st = ucp_worker_set_am_recv_handler(worker, &bye);
  if (st != UCS_OK)
    return from_ucs(StatusCode::unavailable, "cannot install the goodbye message handler", st);
  UcxWorker* raw = w.get();
  Status watched =
      engine.watch_polled(efd, EPOLLIN, [raw](std::uint32_t) { (void)raw->pump(/*arm=*/true); });
  if (!watched.ok()) return watched;
  raw->poller_ =
      engine.add_poller([raw] { return raw->poll(); }, [raw] { return raw->before_sleep(); });
  raw->kick();
  return w;
}

UcxWorker::UcxWorker(ProgressEngine& engine, std::shared_ptr<UcpContext> context,
                     ucp_worker_h worker, int efd, std::uint64_t rndv_threshold)
    : engine_(engine),
      context_(std::move(context)),
      worker_(worker),
      efd_(efd),
      rndv_threshold_(rndv_threshold) {}

UcxWorker::~UcxWorker() {
  if (pump_call_ != 0) engine_.remove_deferred_call(pump_call_);
  if (poller_ != 0) engine_.remove_poller(poller_);
  engine_.unwatch(efd_);
  // Endpoints are gone (the core closes them before backends, and the backend's shutdown drained
  // their closes already unless it was never called): what is left gets kCloseDrain once more.
  finish_closing_now();
  later_.clear();
  if (!closing_.empty()) {
    TICTAC_LOG(warn) << "UCX: " << closing_.size() << " endpoint close(s) did not finish within "
                     << kCloseDrain.count() << " ms; destroying the worker anyway";
    for (void* req : closing_) ucp_request_free(req);  // released: UCX frees it with the worker
  }
  ucp_worker_destroy(worker_);
}

std::uint64_t UcxWorker::register_ep(ucp_ep_h ep, UcxEndpoint* owner) {
  const std::uint64_t serial = next_serial_++;
  by_ep_[ep] = owner;
  by_serial_[serial] = owner;
  return serial;
}

void UcxWorker::unregister_ep(ucp_ep_h ep, std::uint64_t serial) {
  by_ep_.erase(ep);
  by_serial_.erase(serial);
}

UcxEndpoint* UcxWorker::find(std::uint64_t serial) const {
  auto it = by_serial_.find(serial);
  return it == by_serial_.end() ? nullptr : it->second;
}

void UcxWorker::close_ep(ucp_ep_h ep, bool force) {
  // A peer that said goodbye reads nothing more and waits for our acknowledgement: no goodbye
  // back. Its acknowledgement is sent now if send_acks() has not sent it yet, and a healthy close
  // flushes, which delivers it: a forced one dropped an acknowledgement still in flight, and the
  // peer waited kGoodbyeWait (1 s) in about half of the closes where both sides closed at once.
  // (`force` stays: frames in flight, or a failed endpoint.)
  if (peer_left_.count(ep) != 0) {
    auto due = std::find(acks_due_.begin(), acks_due_.end(), ep);
    if (due != acks_due_.end()) {
      acks_due_.erase(due);
      (void)send_goodbye(ep, /*ack=*/true);
    }
    close_now(ep, force);
    return;
  }
  if (force || !send_goodbye(ep, /*ack=*/false)) {
    close_now(ep, force);
    return;
  }
  const auto deadline = Clock::now() + kGoodbyeWait;
  goodbyes_[ep] = Goodbye{deadline};
  engine_.add_timer(deadline, lifetime_.guard([this] { finish_goodbyes(); }));
  kick();
}

namespace {
// One-byte headers of the goodbye messages (static: UCX reads the header until the send completes).
constexpr std::uint8_t kGoodbye = 1;
constexpr std::uint8_t kGoodbyeAck = 2;
const std::uint8_t kGoodbyeHeaders[2] = {kGoodbye, kGoodbyeAck};
}  // namespace

bool UcxWorker::send_goodbye(ucp_ep_h ep, bool ack) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  // REPLY: the peer learns which of its endpoints it came on. EAGER: on the lane the frames took.
  p.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER;
  p.cb.send = &UcxWorker::on_goodbye_sent;
  p.memory_type = kMemoryType;
  const ucs_status_ptr_t r =
      ucp_am_send_nbx(ep, kGoodbyeAmId, &kGoodbyeHeaders[ack ? 1 : 0], 1, nullptr, 0, &p);
  return !UCS_PTR_IS_ERR(r);
}

void UcxWorker::on_goodbye_sent(void* request, ucs_status_t, void*) { ucp_request_free(request); }

ucs_status_t UcxWorker::on_goodbye_am(void* arg, const void* header, size_t header_length, void*,
                                      size_t, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxWorker*>(arg);
  const bool has_ep =
      (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 && param->reply_ep != nullptr;
  if (!has_ep || header_length != 1) return UCS_OK;  // not ours to answer: ignored
  const std::uint8_t kind = *static_cast<const std::uint8_t*>(header);
  if (kind == kGoodbye) {
    // Every frame the peer sent before it has been handed to our endpoint (on_am): acknowledge,
    // outside this callback. Only endpoints still open here are remembered (a closed one's
    // address may be reused by a new endpoint).
    const ucp_ep_h ep = param->reply_ep;
    if (self->by_ep_.count(ep) == 0 && self->goodbyes_.count(ep) == 0) return UCS_OK;
    self->peer_left_.insert(ep);
    self->acks_due_.push_back(ep);
    self->later([self] { self->send_acks(); });
  } else if (kind == kGoodbyeAck) {
    auto it = self->goodbyes_.find(param->reply_ep);
    if (it != self->goodbyes_.end()) {
      it->second.acked = true;
      self->later([self] { self->finish_goodbyes(); });
    }
  }
  return UCS_OK;
}

void UcxWorker::finish_closing_now() {
  // One kCloseDrain in all: the destructor's call after the shutdown's waits no longer.
  if (!drain_start_) drain_start_ = Clock::now();
  const auto start = *drain_start_;
  const auto goodbye_deadline = start + kGoodbyeWait;
  while (!goodbyes_.empty() && Clock::now() < goodbye_deadline) {
    ucp_worker_progress(worker_);
    send_acks();
    finish_goodbyes();
  }
  finish_goodbyes();  // closes the rest (those whose wait is over)
  const auto close_deadline = start + kCloseDrain;
  while (!closing_.empty() && Clock::now() < close_deadline) {
    ucp_worker_progress(worker_);
    send_acks();  // a peer closing at the same time waits for our acknowledgement
  }
}

void UcxWorker::send_acks() {
  std::vector<ucp_ep_h> due;
  due.swap(acks_due_);
  for (ucp_ep_h ep : due) {
    // Open here: registered, or saying goodbye itself (both sides closing at once).
    if (by_ep_.count(ep) != 0 || goodbyes_.count(ep) != 0) (void)send_goodbye(ep, /*ack=*/true);
  }
  if (!due.empty()) kick();  // the sends need progress
}

void UcxWorker::finish_goodbyes() {
  const auto now = Clock::now();
  for (auto it = goodbyes_.begin(); it != goodbyes_.end();) {
    if (!it->second.acked && now < it->second.deadline) {
      ++it;
      continue;
    }
    if (!it->second.acked) {
      TICTAC_LOG(debug) << "UCX: a peer did not acknowledge the goodbye within "
                        << kGoodbyeWait.count() << " ms; closing the endpoint anyway";
    }
    const ucp_ep_h ep = it->first;
    it = goodbyes_.erase(it);
    close_now(ep, /*force=*/false);
  }
}

void UcxWorker::close_now(ucp_ep_h ep, bool force) {
  peer_left_.erase(ep);
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  p.cb.send = &UcxWorker::on_close_done;
  p.user_data = this;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
  if (req != nullptr && !UCS_PTR_IS_ERR(req)) closing_.insert(req);
  kick();
}

void UcxWorker::on_close_done(void* request, ucs_status_t, void* user_data) {
  auto* self = static_cast<UcxWorker*>(user_data);
  self->closing_.erase(request);
  ucp_request_free(request);
}

void UcxWorker::later(Task task) { later_.push_back(Later{std::move(task), 0}); }

void UcxWorker::later_deliver(std::uint64_t serial) { later_.push_back(Later{Task{}, serial}); }

void UcxWorker::kick() {
  armed_ = false;  // an operation was started: arm again before sleeping
  if (in_pump_ || pump_scheduled_) return;
  pump_scheduled_ = true;
  if (pump_call_ == 0)
    pump_call_ = engine_.add_deferred_call([this] { (void)pump(/*arm=*/false); });
  engine_.defer_call(pump_call_);
}

bool UcxWorker::run_later() {
  if (later_.empty()) return false;
  std::vector<Later> tasks;
  tasks.swap(later_spare_);  // empty, with the capacity of earlier batches
  tasks.swap(later_);
  const auto self = lifetime_.token();
  for (Later& t : tasks) {
    if (t.task) {
      t.task();
    } else if (UcxEndpoint* ep = find(t.deliver_serial)) {
      ep->run_delivery();
    }
    if (!self.alive()) return true;
  }
  if (later_spare_.empty()) {
    tasks.clear();
    later_spare_.swap(tasks);
  }
  return true;
}

bool UcxWorker::pump(bool arm) {
  pump_scheduled_ = false;
  if (in_pump_) return false;
  in_pump_ = true;
  bool found = false;
  const auto self = lifetime_.token();
  for (int round = 0; round < kMaxRounds; ++round) {
    const unsigned events = ucp_worker_progress(worker_);
    const bool ran = run_later();
    if (!self.alive()) return true;
    if (events != 0 || ran) {
      found = true;
      armed_ = false;
      if (ran && engine_.tasks_waiting()) {
        // Tasks the sinks queued (a reply, a completion's next post) run before more progress.
        // Nothing is lost by returning: the next spin round pumps again, and before_sleep()
        // kicks a pump for callbacks still queued, or arms (or finds the events), before the
        // loop blocks.
        in_pump_ = false;
        return true;
      }
      continue;
    }
    // Idle. A pump woken by the event fd re-arms it now (an armed fd is not readable); others
    // leave that to before_sleep(), so a spinning loop makes no arm calls at all.
    if (!arm || this->arm()) {
      in_pump_ = false;
      return found;
    }
    if (arm_failed_) break;
    // UCS_ERR_BUSY: events arrived meanwhile; pump again.
  }
  in_pump_ = false;
  // Still busy (or cannot arm): yield to the loop's other work and come back next iteration.
  if (retry_timer_set_) return true;
  retry_timer_set_ = true;
  engine_.add_timer(Clock::now(), lifetime_.guard([this] {
    retry_timer_set_ = false;
    (void)pump(/*arm=*/true);
  }));
  return true;
}

bool UcxWorker::arm() {
  if (armed_) return true;
  const ucs_status_t st = ucp_worker_arm(worker_);
  if (st == UCS_OK) {
    armed_ = true;
    return true;
  }
  if (st != UCS_ERR_BUSY && !arm_failed_) {
    // Cannot sleep on the event fd: poll once per loop iteration instead.
    TICTAC_LOG(warn) << "UCX: ucp_worker_arm failed (" << ucs_status_string(st)
                     << "); polling instead";
    arm_failed_ = true;
  }
  return false;
}

bool UcxWorker::before_sleep() {
  if (in_pump_ || pump_scheduled_) return true;
  if (!later_.empty()) {
    // Callbacks queued while a pump had yielded to the loop's tasks (pump() returns early when
    // tasks wait): no UCX event may come to wake the loop for them (a failed endpoint's report).
    kick();
    return true;
  }
  if (arm()) return false;
  kick();  // events arrived since the last progress (or polling): handle them before sleeping
  return true;
}

bool UcxWorker::poll() {
  if (in_pump_ || pump_scheduled_) return pump_scheduled_;
  // A pump run inline, without the arm: idle, it costs one ucp_worker_progress.
  return pump(/*arm=*/false);
}

void UcxWorker::on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* self = static_cast<UcxWorker*>(arg);
  auto it = self->by_ep_.find(ep);
  if (it != self->by_ep_.end()) {
    it->second->on_error(status);
  } else if (self->goodbyes_.count(ep) != 0) {
    // Failed while waiting for the acknowledgement: nothing to wait for; close it (forced, as
    // after any error) outside this callback.
    self->later([self, ep] {
      if (self->goodbyes_.erase(ep) != 0) self->close_now(ep, /*force=*/true);
    });
  }
}

ucs_status_t UcxWorker::on_am(void* arg, const void* header, size_t header_length, void* data,
                              size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxWorker*>(arg);
  const bool has_ep =
      (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 && param->reply_ep != nullptr;
  auto it = has_ep ? self->by_ep_.find(param->reply_ep) : self->by_ep_.end();
  if (it == self->by_ep_.end()) {
    // A frame for an endpoint we closed already: drop it (a rendezvous sender completes ok).
    return UCS_OK;
  }
  return it->second->on_am(header, header_length, data, length, param->recv_attr);
}

}  // namespace tictac::transport::ucx
