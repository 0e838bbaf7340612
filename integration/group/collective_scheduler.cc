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
    : name_(std::move(name)) {
  const int n = std::max(1, concurrency);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { run(i); });
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

bool CollectiveScheduler::post(bool concurrent, Task task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    pending_.push_back(Pending{concurrent, next_ticket_++, std::move(task)});
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

bool CollectiveScheduler::startable() const {
  if (pending_.empty() || fence_running_) return false;
  return pending_.front().concurrent ? running_ < concurrency() : running_ == 0;
}

void CollectiveScheduler::run(int index) {
  const std::string thread_name = name_.substr(0, 12) + "-" + std::to_string(index);
  ::pthread_setname_np(::pthread_self(), thread_name.substr(0, 15).c_str());
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return startable() || (stopping_ && pending_.empty()); });
    if (!startable()) return;  // stopping and drained
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    ++running_;
    max_running_ = std::max(max_running_, running_);
    if (!p.concurrent) fence_running_ = true;
    // Another task may be startable too (a concurrent one behind this concurrent one).
    cv_.notify_all();
    lock.unlock();
    p.task(p.ticket);
    p.task = nullptr;  // release captures outside the lock
    lock.lock();
    --running_;
    ++finished_;
    if (!p.concurrent) fence_running_ = false;
    cv_.notify_all();
  }
}

}  // namespace tictac::group
