#include "integration/group/gate.h"

#include <utility>

namespace tictac::group {

namespace {
thread_local std::vector<std::shared_ptr<Gate>> g_thread_gates;
thread_local PendingGates* g_pending = nullptr;
}  // namespace

void Gate::open() {
  {
    std::lock_guard lock(mu_);
    if (decided_) return;
    decided_ = true;
    result_ = Status::Ok();
  }
  cv_.notify_all();
}

void Gate::fail(std::string why) {
  {
    std::lock_guard lock(mu_);
    if (decided_) return;
    decided_ = true;
    result_ = Status(StatusCode::cancelled, std::move(why));
  }
  cv_.notify_all();
}

Status Gate::wait(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return decided_; })) {
    return Status(StatusCode::timeout, "its gate stayed closed for " +
                                           std::to_string(timeout.count()) +
                                           " ms (the data it sends was never marked ready)");
  }
  return result_;
}

bool Gate::decided() const {
  std::lock_guard lock(mu_);
  return decided_;
}

GateScope::GateScope(std::shared_ptr<Gate> gate) { push(std::move(gate)); }
GateScope::~GateScope() { pop(); }

void GateScope::push(std::shared_ptr<Gate> gate) { g_thread_gates.push_back(std::move(gate)); }

bool GateScope::pop() {
  if (g_thread_gates.empty()) return false;
  g_thread_gates.pop_back();
  return true;
}

std::vector<std::shared_ptr<Gate>> GateScope::current() { return g_thread_gates; }

PendingGates::PendingGates(std::vector<std::shared_ptr<Gate>> gates,
                           std::chrono::milliseconds timeout, std::string what)
    : gates_(std::move(gates)), timeout_(timeout), what_(std::move(what)), outer_(g_pending) {
  g_pending = this;
}

PendingGates::~PendingGates() { g_pending = outer_; }

Status PendingGates::wait() {
  PendingGates* p = g_pending;
  if (p == nullptr || p->waited_) return p == nullptr ? Status::Ok() : p->result_;
  p->waited_ = true;
  for (const auto& gate : p->gates_) {
    Status opened = gate->wait(p->timeout_);
    if (!opened.ok() && p->result_.ok()) {
      p->result_ = Status(opened.code(), p->what_ + ": not started: " + opened.message());
    }
  }
  return p->result_;
}

bool PendingGates::waited() { return g_pending == nullptr || g_pending->waited_; }

}  // namespace tictac::group
