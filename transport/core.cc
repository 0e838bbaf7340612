#include "transport/core.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/check.h"
#include "common/log.h"

namespace tictac::transport {

Core::Core(ProgressEngine& engine, const TransportConfig& config, std::string name,
           std::vector<std::unique_ptr<Backend>> backends, std::optional<std::string> auth_token,
           CudaDevices& cuda)
    : engine_(engine),
      config_(config),
      local_{std::move(name), config.eager_bytes},
      auth_token_(std::move(auth_token)),
      cuda_(std::make_unique<CudaPath>(engine, cuda, *this)) {
  SendQueueConfig qc;
  qc.chunk_bytes = config.chunk_bytes;
  qc.window_chunks = config.window_chunks;
  qc.enforce_priority = config.enforce_priority;
  qc.auto_chunk = config.auto_chunk;
  qc.auto_window = config.auto_window;
  qc.chunk_target = config.chunk_target;
  qc.solo_chunk_target = config.solo_chunk_target;
  for (auto& b : backends) {
    Device d;
    d.backend = std::move(b);
    // TICTAC_CHUNK_SOLO_MAX when set, else the backend's preference, else the default.
    const std::uint64_t preferred = d.backend->capabilities().solo_chunk_max;
    qc.solo_chunk_max = config.solo_chunk_max != 0 ? config.solo_chunk_max
                        : preferred != 0           ? preferred
                                                   : kDefaultSoloChunkMax;
    d.queue = std::make_unique<SendQueue>(qc);
    devices_.push_back(std::move(d));
  }
}

Core::~Core() {
  // Connections close their endpoints before the backends that made them go away.
  conns_.clear();
  if (auth_token_ && !auth_token_->empty())
    OPENSSL_cleanse(auth_token_->data(), auth_token_->size());
}

Status Core::init() {
  for (Device& d : devices_) {
    const Viability v = d.backend->viability();
    if (!v.viable) {
      TICTAC_LOG(info) << "transport backend " << d.backend->name() << " not viable: " << v.reason;
      continue;
    }
    Status st = d.backend->attach(engine_);
    if (!st.ok()) {
      TICTAC_LOG(warn) << "transport backend " << d.backend->name()
                       << " failed to start: " << st.to_string();
      continue;
    }
    d.attached = true;
    d.cuda_memory = d.backend->capabilities().cuda_memory;
  }
  watchdog();
  return Status::Ok();
}

void Core::watchdog() {
  const auto now = Clock::now();
  for (auto& [id, conn] : conns_) conn->watchdog(now);
  auto period = std::min<std::chrono::milliseconds>(config_.timeout / 4, std::chrono::seconds(1));
  period = std::max(period, std::chrono::milliseconds(1));
  watchdog_timer_ = engine_.add_timer(now + period, [this] { watchdog(); });
}

Core::Device* Core::device_for(std::string_view address, std::string_view* rest, Status* error) {
  const auto sep = address.find("://");
  if (sep == std::string_view::npos) {
    *error =
        invalid_argument("address '" + std::string(address) +
                         "' has no scheme; write e.g. tcp://127.0.0.1:5000 or loopback://name");
    return nullptr;
  }
  const std::string_view scheme = address.substr(0, sep);
  *rest = address.substr(sep + 3);
  std::string known;
  for (Device& d : devices_) {
    if (d.backend->name() == scheme) {
      if (!d.attached) {
        *error = Status(StatusCode::unavailable,
                        "backend '" + std::string(scheme) +
                            "' is not usable here: " + d.backend->viability().reason);
        return nullptr;
      }
      return &d;
    }
    known += (known.empty() ? "" : ", ") + std::string(d.backend->name());
  }
  *error = invalid_argument("no backend '" + std::string(scheme) +
                            "' in this context (have: " + known + ")");
  return nullptr;
}

Connection& Core::add_connection(Device& dev, std::unique_ptr<Endpoint> ep, bool initiator) {
  const PeerId id = next_peer_++;
  auto conn = std::make_unique<Connection>(id, std::move(ep), *dev.queue, *this, config_, local_,
                                           initiator);
  Connection& ref = *conn;
  conns_.emplace(id, std::move(conn));
  ref.start(auth_token_);
  return ref;
}

Result<std::string> Core::listen(std::string_view address) {
  if (closed_) return Status(StatusCode::cancelled, "context is closed");
  std::string_view rest;
  Status error;
  Device* dev = device_for(address, &rest, &error);
  if (dev == nullptr) return error;
  return dev->backend->listen(rest, [this, dev](std::unique_ptr<Endpoint> ep) {
    if (closed_) return;
    std::size_t handshaking = 0;
    for (const auto& [id, c] : conns_) {
      handshaking += c->state() == Connection::State::handshaking && !c->initiator() ? 1 : 0;
    }
    if (handshaking >= config_.max_handshakes) {
      TICTAC_LOG(warn) << "refusing an incoming connection (" << ep->describe()
                       << "): " << handshaking
                       << " handshakes are already in progress (TICTAC_MAX_HANDSHAKES="
                       << config_.max_handshakes << ")";
      ep->close();
      engine_.defer([gone = std::shared_ptr<Endpoint>(std::move(ep))] {});
      return;
    }
    add_connection(*dev, std::move(ep), /*initiator=*/false);
  });
}

void Core::connect(const std::string& address, PeerFn done) {
  if (closed_) {
    done(Status(StatusCode::cancelled, "context is closed"));
    return;
  }
  std::string_view rest;
  Status error;
  Device* dev = device_for(address, &rest, &error);
  if (dev == nullptr) {
    done(error);
    return;
  }
  const std::uint64_t waiter = next_waiter_++;
  connect_waiters_.emplace(waiter, std::move(done));
  dev->backend->connect(rest, Clock::now() + config_.timeout,
                        [this, dev, waiter, address](Result<std::unique_ptr<Endpoint>> ep) {
                          auto w = connect_waiters_.find(waiter);
                          if (w == connect_waiters_.end()) return;  // context closed meanwhile
                          if (!ep.ok()) {
                            PeerFn fn = std::move(w->second);
                            connect_waiters_.erase(w);
                            fn(ep.status().with_context("connect to " + address));
                            return;
                          }
                          Connection& conn = add_connection(*dev, std::move(ep).value(), true);
                          if (conn.state() == Connection::State::failed) {  // could not even start
                            auto again = connect_waiters_.find(waiter);
                            if (again == connect_waiters_.end()) return;
                            PeerFn fn = std::move(again->second);
                            connect_waiters_.erase(again);
                            fn(conn.terminal_status());
                            return;
                          }
                          handshaking_connects_[conn.id()] = waiter;
                        });
}

void Core::accept(Clock::time_point deadline, PeerFn done) {
  if (closed_) {
    done(Status(StatusCode::cancelled, "context is closed"));
    return;
  }
  const std::uint64_t id = next_waiter_++;
  const auto timer = engine_.add_timer(deadline, [this, id] {
    auto it = accept_waiters_.find(id);
    if (it == accept_waiters_.end()) return;
    PeerFn fn = std::move(it->second.done);
    accept_waiters_.erase(it);
    fn(Status(StatusCode::timeout, "no peer connected before the accept deadline"));
  });
  accept_waiters_.emplace(id, AcceptWaiter{std::move(done), timer});
  serve_accepts();
}

void Core::serve_accepts() {
  while (!accepted_.empty() && !accept_waiters_.empty()) {
    auto it = accept_waiters_.begin();
    PeerFn fn = std::move(it->second.done);
    engine_.cancel_timer(it->second.timer);
    accept_waiters_.erase(it);
    const PeerId id = accepted_.front();
    accepted_.erase(accepted_.begin());
    fn(id);
  }
}

Result<std::string> Core::peer_name(PeerId peer) const {
  if (auto d = dead_.find(peer); d != dead_.end()) return d->second.name;
  auto it = conns_.find(peer);
  if (it == conns_.end() || it->second->peer_name().empty()) {
    return invalid_argument("unknown peer id " + std::to_string(peer));
  }
  return it->second->peer_name();
}

Connection* Core::established(PeerId peer, Status* error) {
  if (auto d = dead_.find(peer); d != dead_.end()) {
    *error = d->second.status;
    return nullptr;
  }
  auto it = conns_.find(peer);
  if (it == conns_.end() || it->second->state() == Connection::State::handshaking) {
    *error = invalid_argument("unknown peer id " + std::to_string(peer) +
                              " (use an id returned by connect() or accept())");
    return nullptr;
  }
  if (it->second->state() == Connection::State::failed) {
    *error = it->second->terminal_status();
    return nullptr;
  }
  return it->second.get();
}

void Core::send(std::unique_ptr<Request> req) {
  if (cuda_->hold_send(req)) return;  // behind an earlier device send with the same peer and tag
  Request* r = req.get();
  request_nodes_.try_emplace(requests_, r->id()).first->second = std::move(req);
  if (closed_) {
    finish(r, Status(StatusCode::cancelled, "context is closed"), 0, r->peer());
    return;
  }
  Status error = r->peer() == kAnyPeer
                     ? invalid_argument("send needs a specific peer, not kAnyPeer")
                     : Status::Ok();
  Connection* conn = error.ok() ? established(r->peer(), &error) : nullptr;
  if (conn == nullptr) {
    finish(r, error, 0, r->peer());
    return;
  }
  conn->send(r);
}

void Core::recv(std::unique_ptr<Request> req) {
  Request* r = req.get();
  request_nodes_.try_emplace(requests_, r->id()).first->second = std::move(req);
  if (closed_) {
    finish(r, Status(StatusCode::cancelled, "context is closed"), 0, kNoPeer);
    return;
  }
  if (r->peer() != kAnyPeer) {
    Status error;
    // A peer whose connection ended may have left messages that arrived whole: those still match.
    if (established(r->peer(), &error) == nullptr &&
        !matcher_.has_unexpected(r->peer(), r->tag())) {
      finish(r, error, 0, r->peer());
      return;
    }
  }
  std::optional<Matcher::Message> m = matcher_.on_recv(r->id(), r->peer(), r->tag());
  if (!m) {
    // Waiting: tell the sender, unless an any-source receive for this tag waits ahead of it
    // (then which receive its next message matches depends on which peer sends first).
    if (r->peer() != kAnyPeer && !matcher_.any_source_waiting(r->tag())) {
      conns_.at(r->peer())->advertise(r, matcher_.waiting_for(r->peer(), r->tag()) - 1);
    }
    return;
  }
  cuda_->on_bound(r->id(), m->peer);
  if (arrived_.holds(m->peer, m->msg_id)) {
    deliver_arrived(r, *m);
    return;
  }
  conns_.at(m->peer)->bind(m->msg_id, r);
}

void Core::deliver_arrived(Request* r, const Matcher::Message& m) {
  std::optional<ArrivedMessages::Message> a = arrived_.take(m.peer, m.msg_id);
  TICTAC_CHECK(a.has_value(), "no kept message " << m.msg_id << " of peer " << m.peer);
  if (a->total > r->length()) {
    finish(r,
           Status(StatusCode::invalid_argument,
                  "message of " + std::to_string(a->total) + " bytes (tag " +
                      std::to_string(a->tag) + ") from peer " + std::to_string(m.peer) +
                      " (its connection has ended) does not fit " + "the posted receive of " +
                      std::to_string(r->length()) + " bytes"),
           0, m.peer);
    return;
  }
  if (a->total > 0) std::memcpy(r->data(), a->bytes.get(), a->total);
  finish(r, Status::Ok(), a->total, m.peer);
}

void Core::keep_arrived(Connection& conn, std::uint64_t msg_id, Tag tag, std::uint64_t total,
                        std::unique_ptr<std::byte[]> bytes) {
  if (closed_) return;  // nobody can receive it any more
  for (const auto& [peer, id] : arrived_.keep(conn.id(), msg_id, {tag, total, std::move(bytes)})) {
    (void)matcher_.drop_message(peer, id);
  }
}

Request* Core::adopt_device(std::unique_ptr<Request> req) {
  Request* r = req.get();
  request_nodes_.try_emplace(requests_, r->id()).first->second = std::move(req);
  if (closed_) {
    finish(r, Status(StatusCode::cancelled, "context is closed"), 0, r->peer());
    return nullptr;
  }
  return r;
}

void Core::send_device(std::unique_ptr<Request> req, const DeviceRoute& route) {
  if (Request* r = adopt_device(std::move(req))) {
    cuda_->send(r, route);
  } else {
    cuda_->drop(route);
  }
}

void Core::recv_device(std::unique_ptr<Request> req, const DeviceRoute& route) {
  if (Request* r = adopt_device(std::move(req))) {
    cuda_->recv(r, route);
  } else {
    cuda_->drop(route);
  }
}

void Core::cancel(RequestId id) {
  if (cuda_->cancel(id)) return;  // a device request: its inner request is cancelled through here
  auto it = requests_.find(id);
  if (it == requests_.end()) return;  // completed already
  Request* r = it->second.get();
  if (r->kind() == RequestKind::recv && matcher_.cancel_recv(id)) {
    finish(r, Status(StatusCode::cancelled, "receive cancelled"), 0, kNoPeer);
    return;
  }
  if (r->kind() == RequestKind::send) {
    auto c = conns_.find(r->peer());
    if (c != conns_.end()) (void)c->second->cancel(r);
    return;
  }
  for (auto& [pid, conn] : conns_) {
    if (conn->cancel(r)) return;
  }
}

void Core::close(const Status& why) {
  if (closed_) return;
  closed_ = true;
  engine_.cancel_timer(watchdog_timer_);
  cuda_->close(why);
  for (auto& [id, conn] : conns_) conn->fail(why);
  for (RequestId id : matcher_.take_all_recvs()) finish(requests_.at(id).get(), why, 0, kNoPeer);
  auto waiters = std::move(connect_waiters_);
  connect_waiters_.clear();
  for (auto& [id, fn] : waiters) fn(why);
  auto accepts = std::move(accept_waiters_);
  accept_waiters_.clear();
  for (auto& [id, w] : accepts) {
    engine_.cancel_timer(w.timer);
    w.done(why);
  }
  for (Device& d : devices_) {
    if (d.attached) d.backend->shutdown();
  }
  TICTAC_CHECK(requests_.empty(), requests_.size() << " requests left after close");
}

// ---------------------------------------------------------------------------------------------
// ConnectionHost

Request* Core::match_message(Connection& conn, Tag tag, std::uint64_t msg_id) {
  std::optional<RequestId> id = matcher_.on_message(conn.id(), tag, msg_id);
  if (!id) return nullptr;
  cuda_->on_bound(*id, conn.id());
  return requests_.at(*id).get();
}

void Core::forget_message(Connection& conn, std::uint64_t msg_id) {
  (void)matcher_.drop_message(conn.id(), msg_id);
}

void Core::finish(Request* req, const Status& status, std::uint64_t bytes, PeerId source) {
  const RequestId id = req->id();
  auto it = requests_.find(id);
  TICTAC_CHECK(it != requests_.end() && it->second.get() == req,
               "finishing an unknown request " << id);
  std::unique_ptr<Request> owned = std::move(it->second);
  request_nodes_.erase(requests_, it);
  if (trace_ != nullptr) trace_->request(*owned, status, bytes, source);
  owned->complete(status, bytes, source);
}

void Core::connection_established(Connection& conn) {
  auto c = handshaking_connects_.find(conn.id());
  if (c != handshaking_connects_.end()) {
    auto w = connect_waiters_.find(c->second);
    handshaking_connects_.erase(c);
    if (w != connect_waiters_.end()) {
      PeerFn fn = std::move(w->second);
      connect_waiters_.erase(w);
      fn(conn.id());
    }
    return;
  }
  if (!conn.initiator()) {
    accepted_.push_back(conn.id());
    serve_accepts();
  }
}

void Core::connection_failed(Connection& conn, const Status& status) {
  cuda_->peer_failed(conn.id(), status);
  const PeerId peer = conn.id();
  auto kept = [this, peer](std::uint64_t msg_id) { return arrived_.holds(peer, msg_id); };
  for (RequestId id : matcher_.drop_peer(peer, kept))
    finish(requests_.at(id).get(), status, 0, peer);
  auto c = handshaking_connects_.find(conn.id());
  if (c != handshaking_connects_.end()) {
    auto w = connect_waiters_.find(c->second);
    handshaking_connects_.erase(c);
    if (w != connect_waiters_.end()) {
      PeerFn fn = std::move(w->second);
      connect_waiters_.erase(w);
      fn(status);
    }
  }
  // A peer that failed after its handshake is still handed out by accept(): its requests then
  // complete with the terminal status, so the failure is visible instead of silently skipped.
  // The endpoint may be in the middle of the callback that reported the failure: free it later.
  engine_.defer([ep = std::shared_ptr<Endpoint>(conn.release_endpoint())] {});
  // A peer refused (or lost) during the handshake was never handed out and owns no requests:
  // forget it, so that peers failing the handshake again and again cost no memory. A peer that
  // failed later keeps only its name and terminal status (bury()).
  if (conn.peer_name().empty()) {
    engine_.defer([this, id = conn.id()] { conns_.erase(id); });
  } else {
    engine_.defer([this, id = conn.id()] { bury(id); });
  }
}

void Core::bury(PeerId peer) {
  auto it = conns_.find(peer);
  if (it == conns_.end() || closed_) return;  // close() fails and keeps every connection
  dead_.emplace(peer, DeadPeer{it->second->peer_name(), it->second->terminal_status()});
  dead_order_.push_back(peer);
  conns_.erase(it);
  while (dead_order_.size() > kMaxDeadPeers) {
    const PeerId oldest = dead_order_.front();
    for (std::uint64_t id : arrived_.drop_peer(oldest)) (void)matcher_.drop_message(oldest, id);
    dead_.erase(oldest);
    dead_order_.pop_front();
  }
}

// ---------------------------------------------------------------------------------------------
// CudaPathHost

void Core::submit_inner(std::unique_ptr<Request> req) {
  if (req->kind() == RequestKind::send) {
    send(std::move(req));
  } else {
    recv(std::move(req));
  }
}

void Core::fail_peer(PeerId peer, const Status& why) {
  auto it = conns_.find(peer);
  if (it != conns_.end()) it->second->fail(why);
}

bool Core::abort_unmatched(RequestId id, const Status& why) {
  if (!matcher_.cancel_recv(id)) return false;
  finish(requests_.at(id).get(), why, 0, kNoPeer);
  return true;
}

bool Core::device_memory_ok(PeerId peer) const {
  if (peer == kAnyPeer) {
    bool any = false;
    for (const Device& d : devices_) {
      if (!d.attached) continue;
      if (!d.cuda_memory) return false;
      any = true;
    }
    return any;
  }
  auto it = conns_.find(peer);
  if (it == conns_.end()) return false;  // the inner request then fails with the peer's error
  for (const Device& d : devices_) {
    if (d.queue.get() == &it->second->queue()) return d.cuda_memory;
  }
  return false;
}

bool Core::on_loop_thread() const {
  // Manual mode: whoever calls progress() is the loop thread for that call (tests drive it).
  return engine_.mode() == ProgressEngine::Mode::manual || engine_.on_loop_thread();
}

std::size_t Core::unexpected_count(const Connection& conn) const {
  return matcher_.unexpected_from(conn.id());
}

void Core::schedule_pump(SendQueue& queue) {
  for (Device& d : devices_) {
    if (d.queue.get() != &queue) continue;
    if (d.pump_scheduled) return;
    d.pump_scheduled = true;
    engine_.defer([this, dev = &d] { pump(*dev); });
    return;
  }
}

void Core::pump(Device& dev) {
  dev.pump_scheduled = false;
  auto can_send = [this](PeerId p) {
    auto it = conns_.find(p);
    return it != conns_.end() && it->second->has_capacity();
  };
  auto can_preempt = [this](PeerId p, Priority priority) {
    auto it = conns_.find(p);
    return it != conns_.end() && it->second->has_urgent_capacity(priority);
  };
  while (std::optional<Chunk> c = dev.queue->pop(can_send, can_preempt)) {
    conns_.at(c->peer)->post_chunk(*c);
  }
}

}  // namespace tictac::transport
