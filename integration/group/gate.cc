#include "integration/group/gate.h"

#include <utility>

namespace tictac::group {

namespace {
thread_local std::vector<std::shared_ptr<Gate>> g_thread_gates;
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

}  // namespace tictac::group
