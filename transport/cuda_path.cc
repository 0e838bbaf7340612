#include "transport/cuda_path.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

namespace tictac::transport {
namespace {

constexpr unsigned kSpinPolls = 64;  // idle polls before backing off to kBackoff
constexpr auto kBackoff = std::chrono::milliseconds(1);
constexpr RequestId kFirstInner = RequestId{1} << 62;

std::string what(const Request& r) {
  return std::string(r.kind() == RequestKind::send ? "device send" : "device receive") + " of " +
         std::to_string(r.length()) + " bytes (tag " + std::to_string(r.tag()) + ")";
}

using Lock = std::lock_guard<std::mutex>;

}  // namespace

Status enqueue_at_submit(CudaDevice& dev, bool send, DeviceRoute& route) {
  Lock lock(dev.mutex);
  if (send) {
    Result<std::uint64_t> gate = dev.gate->after_producer(route.stream);
    if (gate.status().code() == StatusCode::resource_exhausted) return Status::Ok();  // the loop retries
    TICTAC_RETURN_IF_ERROR(gate);
    route.gate_id = *gate;
    return Status::Ok();
  }
  Result<cuda::ArrivalTicket> t = dev.arrivals->wait_on_stream(route.stream, Clock::now());
  if (t.status().code() == StatusCode::resource_exhausted) return Status::Ok();  // the loop retries
  TICTAC_RETURN_IF_ERROR(t);
  route.ticket = *t;
  return Status::Ok();
}

CudaPath::~CudaPath() {
  if (poll_scheduled_) engine_.cancel_timer(poll_timer_);
}

void CudaPath::touch(CudaDevice* dev) {
  if (std::find(touched_.begin(), touched_.end(), dev) == touched_.end()) touched_.push_back(dev);
}

void CudaPath::send(Request* user, const DeviceRoute& route) { add(user, route, /*send=*/true); }

void CudaPath::recv(Request* user, const DeviceRoute& route) { add(user, route, /*send=*/false); }

void CudaPath::drop(const DeviceRoute& route) {
  CudaDevice* dev = devices_.get(route.device);
  if (dev == nullptr || (route.gate_id == 0 && !route.ticket)) return;
  Lock lock(dev->mutex);
  if (route.gate_id != 0) (void)dev->gate->cancel(route.gate_id);
  if (route.ticket) (void)dev->arrivals->fail(*route.ticket);
}

void CudaPath::add(Request* user, const DeviceRoute& route, bool send) {
  const RequestId id = user->id();
  CudaDevice* dev = devices_.get(route.device);
  if (dev == nullptr) {
    host_.finish_user(user,
                      internal_error(what(*user) + " on CUDA device " + std::to_string(route.device) +
                                     " reached the loop before the device was prepared"),
                      0, user->peer());
    return;
  }
  touch(dev);
  Entry e;
  e.user = user;
  e.route = route;
  e.dev = dev;
  e.send = send;
  e.staged = !host_.device_memory_ok(user->peer());
  if (send) user->set_state(RequestState::waiting_for_stream);
  auto [it, inserted] = entries_.emplace(id, std::move(e));
  if (!inserted) {
    drop(route);
    host_.finish_user(user, internal_error("request id " + std::to_string(id) + " used twice"), 0, user->peer());
    return;
  }
  if (send) order_[{user->peer(), user->tag()}].push_back(Waiting{id, nullptr});
  start(id, it->second);
}

void CudaPath::start(RequestId id, Entry& e) {
  e.phase = Phase::start;
  const Request& u = *e.user;
  if (e.send && (!e.staged || e.route.gate_id != 0)) {
    if (e.route.gate_id != 0) {  // recorded at submission
      e.gate_id = std::exchange(e.route.gate_id, 0);
      e.after_gate = e.staged;
    } else {
      Result<std::uint64_t> gate = [&] {
        Lock lock(e.dev->mutex);
        return e.dev->gate->after_producer(e.route.stream);
      }();
      if (gate.status().code() == StatusCode::resource_exhausted) return schedule_poll();  // retried
      if (!gate.ok()) return finish(id, gate.status().with_context(what(u)), 0, u.peer());
      e.gate_id = *gate;
    }
    e.phase = Phase::gated;
    gates_[{e.dev, e.gate_id}] = id;
    return schedule_poll();
  }
  if (e.send) return start_copies(id, e);
  Result<cuda::ArrivalTicket> t = [&]() -> Result<cuda::ArrivalTicket> {
    if (e.route.ticket) {  // enqueued at submission
      cuda::ArrivalTicket pre = *e.route.ticket;
      e.route.ticket.reset();
      return pre;
    }
    Lock lock(e.dev->mutex);
    return e.dev->arrivals->wait_on_stream(e.route.stream, Clock::now());
  }();
  if (t.status().code() == StatusCode::resource_exhausted) return schedule_poll();  // retried
  if (!t.ok()) return finish(id, t.status().with_context(what(u)), 0, u.peer());
  e.ticket = *t;
  e.deadline = Clock::now() + e.dev->arrival_timeout;
  tickets_[{e.dev, t->id}] = id;
  if (!e.staged && host_.has_unexpected(u.peer(), u.tag())) e.staged = true;
  if (e.staged && u.length() > 0) e.shadow = e.dev->shadows->take(u.length());
  submit_inner_recv(id, e);
}

void CudaPath::start_copies(RequestId id, Entry& e) {
  e.total = e.user->length();
  if (e.total == 0) return ready_to_send(id, e);
  e.shadow = e.dev->shadows->take(e.total);
  e.phase = Phase::to_host;
  issue_copies(id, e);
}

void CudaPath::gate_released(RequestId id, Entry& e) {
  if (e.staged) return start_copies(id, e);
  ready_to_send(id, e);
}

void CudaPath::ready_to_send(RequestId id, Entry& e) {
  (void)id;
  e.ready = true;
  drain({e.user->peer(), e.user->tag()});
}

void CudaPath::drain(const OrderKey& key) {
  if (!draining_.insert(key).second) return;  // the outer drain of this key goes on
  for (;;) {
    auto q = order_.find(key);
    if (q == order_.end() || q->second.empty()) break;
    Waiting& w = q->second.front();
    if (w.host) {
      std::unique_ptr<Request> r = std::move(w.host);
      q->second.pop_front();
      bypass_ = true;
      host_.submit_inner(std::move(r));
      bypass_ = false;
      continue;
    }
    auto it = entries_.find(w.id);
    if (it != entries_.end() && !it->second.ready) break;  // the head still waits
    const RequestId id = w.id;
    q->second.pop_front();
    if (it != entries_.end()) submit_inner(id, it->second, RequestKind::send);
  }
  auto q = order_.find(key);
  if (q != order_.end() && q->second.empty()) order_.erase(q);
  draining_.erase(key);
}

bool CudaPath::hold_send(std::unique_ptr<Request>& req) {
  if (bypass_ || req->id() >= kFirstInner) return false;
  auto q = order_.find({req->peer(), req->tag()});
  if (q == order_.end() || q->second.empty()) return false;
  const RequestId id = req->id();
  q->second.push_back(Waiting{id, std::move(req)});
  return true;
}

template <typename Pred>
void CudaPath::drop_held(Pred pred, const Status& why) {
  std::vector<std::unique_ptr<Request>> dropped;
  std::vector<OrderKey> keys;
  for (auto& [key, q] : order_) {
    for (auto it = q.begin(); it != q.end();) {
      if (it->host && pred(*it->host)) {
        dropped.push_back(std::move(it->host));
        it = q.erase(it);
        keys.push_back(key);
      } else {
        ++it;
      }
    }
  }
  for (auto& r : dropped) r->complete(why, 0, r->peer());
  for (const OrderKey& k : keys) drain(k);
}

void CudaPath::submit_inner_recv(RequestId id, Entry& e) { submit_inner(id, e, RequestKind::recv); }

void CudaPath::submit_inner(RequestId id, Entry& e, RequestKind kind) {
  Request& u = *e.user;
  std::byte* data = e.staged ? e.shadow.data() : u.data();
  e.inner_id = next_inner_++;
  e.phase = Phase::inner;
  by_inner_[e.inner_id] = id;
  u.set_state(RequestState::posted);
  auto inner = std::make_unique<Request>(
      e.inner_id, kind, u.peer(), u.tag(), data, u.length(), u.priority(),
      [this, id](const Status& st, std::uint64_t bytes, PeerId source) { on_inner_done(id, st, bytes, source); });
  schedule_poll();
  host_.submit_inner(std::move(inner));  // may complete it (and erase `e`) at once
}

void CudaPath::on_inner_done(RequestId id, const Status& status, std::uint64_t bytes, PeerId source) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;  // completed already (close, timeout)
  Entry& e = it->second;
  by_inner_.erase(e.inner_id);
  if (e.send || !status.ok()) return finish(id, status, bytes, source);
  e.source = source;
  e.total = bytes;
  if (e.staged && bytes > 0) {
    e.phase = Phase::to_device;
    return issue_copies(id, e);
  }
  arrived(id, e);
}

void CudaPath::issue_copies(RequestId id, Entry& e) {
  cuda::StagingPool& staging = *e.dev->staging;
  const std::uint64_t piece = staging.buffer_bytes();
  while (e.issued < e.total) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(piece, e.total - e.issued));
    Result<std::uint64_t> copy = copy_piece(e, n);
    if (copy.status().code() == StatusCode::resource_exhausted) break;  // more after a poll
    if (!copy.ok()) {
      return finish(id, copy.status().with_context(what(*e.user) + ": staging through host memory"), 0,
                    e.user->peer());
    }
    copies_[{e.dev, *copy}] = CopyRef{id, e.issued};
    e.issued += n;
  }
  schedule_poll();
}

Result<std::uint64_t> CudaPath::copy_piece(Entry& e, std::size_t n) {
  cuda::StagingPool& staging = *e.dev->staging;
  std::unique_lock<std::mutex> lock(e.dev->mutex);
  if (e.send && e.after_gate) return staging.copy_to_host_after_gate(e.user->data() + e.issued, n);
  if (e.send) return staging.copy_to_host(e.user->data() + e.issued, n, e.route.stream);
  Result<cuda::StagingBuffer> b = staging.acquire();
  if (!b.ok()) return b.status();
  lock.unlock();  // the buffer is lent to this thread: fill it without holding up submitters
  std::memcpy(b->host, e.shadow.data() + e.issued, n);
  lock.lock();
  Result<std::uint64_t> copy = staging.copy_to_device(*b, n, e.user->data() + e.issued, e.route.stream);
  if (!copy.ok()) (void)staging.release(*b);  // refused (harmlessly) when the copy was enqueued anyway
  return copy;
}

void CudaPath::on_copy_done(const cuda::StagingDone& done, CudaDevice* dev) {
  const bool lent = done.kind == cuda::StagingDone::Kind::to_host && done.status.ok();
  auto c = copies_.find({dev, done.id});
  auto it = c == copies_.end() ? entries_.end() : entries_.find(c->second.user);
  if (it == entries_.end()) {  // its request completed meanwhile
    if (c != copies_.end()) copies_.erase(c);
    if (lent) {
      Lock lock(dev->mutex);
      (void)dev->staging->release(done.buffer);
    }
    return;
  }
  const CopyRef ref = c->second;
  copies_.erase(c);
  Entry& e = it->second;
  if (!done.status.ok()) {
    return finish(ref.user, done.status.with_context(what(*e.user) + ": staging through host memory"), 0,
                  e.user->peer());
  }
  if (lent) {
    std::memcpy(e.shadow.data() + ref.offset, done.buffer.host, done.bytes);
    Lock lock(dev->mutex);
    (void)dev->staging->release(done.buffer);
  }
  e.copied += done.bytes;
  if (e.copied < e.total) return;
  if (e.send) return ready_to_send(ref.user, e);
  arrived(ref.user, e);
}

void CudaPath::arrived(RequestId id, Entry& e) {
  e.phase = Phase::releasing;
  Status s = [&] {
    Lock lock(e.dev->mutex);
    return e.dev->arrivals->complete(*e.ticket);
  }();
  if (s.code() == StatusCode::resource_exhausted) return schedule_poll();  // retried
  if (s.ok()) {
    tickets_.erase({e.dev, e.ticket->id});
    e.ticket.reset();
  }
  finish(id, s.ok() ? s : s.with_context(what(*e.user) + ": releasing the consumer stream"),
         s.ok() ? e.total : 0, e.source);
}

void CudaPath::finish(RequestId id, const Status& status, std::uint64_t bytes, PeerId source) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  {
    Lock lock(e.dev->mutex);
    if (e.ticket) (void)e.dev->arrivals->fail(*e.ticket);  // the error sentinel: the stream never hangs
    if (e.phase == Phase::gated) (void)e.dev->gate->cancel(e.gate_id);
    if (e.route.gate_id != 0) (void)e.dev->gate->cancel(e.route.gate_id);  // not started yet
    if (e.route.ticket) (void)e.dev->arrivals->fail(*e.route.ticket);
  }
  if (e.ticket) tickets_.erase({e.dev, e.ticket->id});
  if (e.phase == Phase::gated) gates_.erase({e.dev, e.gate_id});
  if (e.phase == Phase::inner) by_inner_.erase(e.inner_id);  // its callback finds nothing
  const bool unsent = e.send && e.phase != Phase::inner;
  Request* user = e.user;
  const OrderKey key{user->peer(), user->tag()};
  entries_.erase(it);  // copies still in flight return their buffers when they finish
  host_.finish_user(user, status, bytes, source);
  if (unsent) drain(key);  // what waited behind it goes now
}

bool CudaPath::cancel(RequestId id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    bool held = false;
    auto match = [&](const Request& r) {
      if (r.id() != id) return false;
      held = true;
      return true;
    };
    drop_held(match, Status(StatusCode::cancelled, "send cancelled"));
    return held;
  }
  Entry& e = it->second;
  switch (e.phase) {
    case Phase::inner:
      host_.cancel_inner(e.inner_id);  // its callback completes the device request
      break;
    case Phase::to_device:
    case Phase::releasing:
      break;  // the bytes are here and being copied up: completes normally
    default:
      finish(id, Status(StatusCode::cancelled, what(*e.user) + " cancelled"), 0, e.user->peer());
  }
  return true;
}

void CudaPath::on_bound(RequestId inner, PeerId peer) {
  auto it = by_inner_.find(inner);
  if (it != by_inner_.end()) entries_.at(it->second).bound = peer;
}

void CudaPath::peer_failed(PeerId peer, const Status& why) {
  std::vector<RequestId> ids;
  for (const auto& [id, e] : entries_) {
    const bool before_inner = e.phase == Phase::start || e.phase == Phase::gated || e.phase == Phase::to_host;
    if (before_inner && e.user->peer() == peer) ids.push_back(id);
  }
  for (RequestId id : ids) finish(id, why, 0, peer);
  drop_held([peer](const Request& r) { return r.peer() == peer; }, why);
}

void CudaPath::close(const Status& why) {
  drop_held([](const Request&) { return true; }, why);
  std::vector<RequestId> ids;
  for (const auto& [id, e] : entries_) ids.push_back(id);
  for (RequestId id : ids) finish(id, why, 0, kNoPeer);
}

void CudaPath::on_timeout(RequestId id, const cuda::ArrivalFailure& failure) {
  Entry& e = entries_.at(id);
  tickets_.erase({e.dev, failure.ticket.id});
  e.ticket.reset();  // already released with the sentinel
  const Status why(StatusCode::timeout, what(*e.user) + ": " + failure.status.message());
  if (e.phase == Phase::inner && e.bound != kNoPeer) {
    host_.fail_peer(e.bound, why);  // the peer announced it and went quiet: the endpoint failed
    return;
  }
  if (e.phase == Phase::inner && host_.abort_unmatched(e.inner_id, why)) return;
  finish(id, why, 0, e.source);
}

bool CudaPath::busy() const {
  if (!copies_.empty()) return true;
  for (CudaDevice* d : touched_) {
    Lock lock(d->mutex);
    if (d->gate->pending() > 0) return true;
  }
  for (const auto& [id, e] : entries_) {
    if (e.phase == Phase::start || e.phase == Phase::releasing || e.issued < e.total) return true;
  }
  return false;
}

void CudaPath::schedule_poll() {
  const auto now = Clock::now();
  std::optional<Clock::time_point> when;
  if (busy()) {
    when = idle_polls_ < kSpinPolls ? now : now + kBackoff;
  } else {
    for (const auto& [id, e] : entries_) {
      if (e.ticket && (!when || e.deadline < *when)) when = e.deadline;
    }
  }
  if (!when) return;
  if (poll_scheduled_ && poll_at_ <= *when) return;
  if (poll_scheduled_) engine_.cancel_timer(poll_timer_);
  poll_scheduled_ = true;
  poll_at_ = *when;
  poll_timer_ = engine_.add_timer(*when, [this] { poll(); });
}

void CudaPath::poll() {
  poll_scheduled_ = false;
  bool moved = false;
  const auto now = Clock::now();
  for (CudaDevice* dev : touched_) {
    std::vector<cuda::GateRelease> released;
    std::vector<cuda::StagingDone> copied;
    std::vector<cuda::ArrivalFailure> late;
    {
      Lock lock(dev->mutex);
      released = dev->gate->poll();
      copied = dev->staging->poll();
      late = dev->arrivals->poll(now);
    }
    for (const cuda::GateRelease& r : released) {
      moved = true;
      auto g = gates_.find({dev, r.id});
      if (g == gates_.end()) continue;  // cancelled
      const RequestId id = g->second;
      gates_.erase(g);
      Entry& e = entries_.at(id);
      if (!r.status.ok()) {
        finish(id, r.status.with_context(what(*e.user) + ": waiting for its producer stream"), 0, e.user->peer());
      } else {
        gate_released(id, e);
      }
    }
    for (const cuda::StagingDone& d : copied) {
      moved = true;
      on_copy_done(d, dev);
    }
    for (const cuda::ArrivalFailure& f : late) {
      moved = true;
      auto t = tickets_.find({dev, f.ticket.id});
      if (t != tickets_.end()) on_timeout(t->second, f);
    }
  }
  // Work that waited for a pool (events, flags, staging buffers) retries now.
  std::vector<RequestId> retry;
  for (const auto& [id, e] : entries_) {
    if (e.phase == Phase::start || e.phase == Phase::releasing || e.issued < e.total) retry.push_back(id);
  }
  for (RequestId id : retry) {
    auto it = entries_.find(id);
    if (it == entries_.end()) continue;
    Entry& e = it->second;
    if (e.phase == Phase::start) {
      start(id, e);
    } else if (e.phase == Phase::releasing) {
      arrived(id, e);
    } else if (e.phase == Phase::to_host || e.phase == Phase::to_device) {
      issue_copies(id, e);
    }
  }
  idle_polls_ = moved ? 0 : idle_polls_ + 1;
  schedule_poll();
}

}  // namespace tictac::transport
