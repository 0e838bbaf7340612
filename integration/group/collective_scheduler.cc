#include "integration/group/collective_scheduler.h"

#include <pthread.h>

#include <algorithm>

#include "common/tunables.h"

namespace tictac::group {
namespace {

const IntTunable kConcurrencyTunable{
    "TICTAC_COLL_CONCURRENCY", CollectiveScheduler::kDefaultConcurrency,
    "torch backend: collectives that carry a priority (tictac.torch.priority, ordered_ddp's "
    "buckets) that may run at once per process group, so a high-priority all-reduce overtakes "
    "a big low-priority one mid-ring; 1 = one at a time in call order (ops without a priority "
    "always run alone, in call order)"};

}  // namespace

CollectiveScheduler::CollectiveScheduler(std::string name, int concurrency)
    : name_(std::move(name)),
      concurrency_(std::max(1, concurrency)),
      urgent_limit_(std::max(2 * concurrency_, kUrgentLimit)) {
  // Above 1: up to urgent_limit_ running (the slots, then more urgent tasks), and the oldest
  // task's spare one. Idle threads sleep on the condition variable.
  const int threads = concurrency_ == 1 ? 1 : urgent_limit_ + 1;
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { run(i); });
}

CollectiveScheduler::~CollectiveScheduler() { shutdown(); }

Result<int> CollectiveScheduler::configured_concurrency() {
  Result<std::int64_t> v = kConcurrencyTunable.get();
  if (!v.ok()) return v.status();
  if (*v < 1 || *v > 64) {
    return invalid_argument("TICTAC_COLL_CONCURRENCY=" + std::to_string(*v) +
                            " is outside [1, 64] (1 = collectives one at a time)");
  }
  return static_cast<int>(*v);
}

bool CollectiveScheduler::post(bool concurrent, std::int64_t priority, Task task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    pending_.push_back(Pending{concurrent, priority, next_ticket_++, std::move(task)});
  }
  cv_.notify_all();
  return true;
}

void CollectiveScheduler::shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  }
}

int CollectiveScheduler::max_running() const {
  std::lock_guard lock(mu_);
  return max_running_;
}

std::uint64_t CollectiveScheduler::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

std::deque<CollectiveScheduler::Pending>::iterator CollectiveScheduler::next_to_start() {
  if (pending_.empty() || fence_running_) return pending_.end();
  auto front = pending_.begin();
  // A fence, or one collective thread: strictly in posting order, alone.
  if (!front->concurrent || concurrency_ == 1) return running_ == 0 ? front : pending_.end();
  // The smallest priority among the concurrent tasks ahead of the first fence (ties: oldest).
  auto best = front;
  for (auto it = front; it != pending_.end() && it->concurrent; ++it) {
    if (it->priority < best->priority) best = it;
  }
  if (running_ < concurrency_) return best;
  // Slots taken: a task more urgent than everything running still starts (up to urgent_limit_
  // running), so a high-priority bucket launched last need not wait for a slot held by
  // lower-priority collectives that the transport is starving for its sake (docs/ddp.md).
  if (running_ < urgent_limit_ && best->priority < *running_priorities_.begin()) return best;
  // The oldest pending task starts if it is older than every running one: the spare slot that
  // keeps the oldest collective always able to start.
  if (front->ticket < *running_tickets_.begin()) return front;
  return pending_.end();
}

void CollectiveScheduler::run(int index) {
  const std::string thread_name = name_.substr(0, 12) + "-" + std::to_string(index);
  ::pthread_setname_np(::pthread_self(), thread_name.substr(0, 15).c_str());
  std::unique_lock lock(mu_);
  for (;;) {
    auto next = pending_.end();
    cv_.wait(lock, [&] {
      next = next_to_start();
      return next != pending_.end() || (stopping_ && pending_.empty());
    });
    if (next == pending_.end()) return;  // stopping and drained
    Pending p = std::move(*next);
    pending_.erase(next);
    ++running_;
    running_tickets_.insert(p.ticket);
    running_priorities_.insert(p.priority);
    max_running_ = std::max(max_running_, running_);
    if (!p.concurrent) fence_running_ = true;
    // Another task may be startable too (a concurrent one behind this concurrent one).
    cv_.notify_all();
    lock.unlock();
    p.task(p.ticket);
    p.task = nullptr;  // release captures outside the lock
    lock.lock();
    --running_;
    running_tickets_.erase(running_tickets_.find(p.ticket));
    running_priorities_.erase(running_priorities_.find(p.priority));
    ++finished_;
    if (!p.concurrent) fence_running_ = false;
    cv_.notify_all();
  }
}

}  // namespace tictac::group
