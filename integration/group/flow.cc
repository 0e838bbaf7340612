#include "integration/group/flow.h"

#include <algorithm>

#include "integration/group/group.h"

namespace tictac::group {

struct Flow::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::uint64_t> finished;  // keys of successful transfers not yet handed out
  std::vector<int> pending;            // ranks with an unfinished transfer (one entry each)
  int in_transport = 0;                // callbacks not yet run
  Status first;                        // first failure
};

Flow::Flow(Group& group, std::string what, transport::Priority priority)
    : group_(group),
      what_(std::move(what)),
      priority_(priority),
      deadline_(std::chrono::steady_clock::now() + group.timeout()),
      state_(std::make_shared<State>()) {}

Flow::~Flow() {
  if (outstanding_ > 0) abort();
}

void Flow::send(std::uint64_t key, int dst, std::uint64_t tag, const void* data,
                std::size_t bytes) {
  post(true, key, dst, tag, const_cast<void*>(data), bytes);
}

void Flow::recv(std::uint64_t key, int src, std::uint64_t tag, void* data, std::size_t bytes) {
  post(false, key, src, tag, data, bytes);
}

void Flow::exchange(std::uint64_t key, int dst, std::uint64_t send_tag, const void* send_data,
                    std::size_t send_bytes, int src, std::uint64_t recv_tag, void* recv_data,
                    std::size_t recv_bytes) {
  const Unit unit = open_unit(2);  // both counted before either can finish
  group_.begin_batch();
  send_in(unit, key, dst, send_tag, send_data, send_bytes);
  recv_in(unit, key, src, recv_tag, recv_data, recv_bytes);
  group_.end_batch();
}

Flow::Unit Flow::open_unit(int transfers) {
  ++outstanding_;
  return std::make_shared<int>(transfers);
}

void Flow::send_in(const Unit& unit, std::uint64_t key, int dst, std::uint64_t tag,
                   const void* data, std::size_t bytes) {
  post(true, key, dst, tag, const_cast<void*>(data), bytes, unit);
}

void Flow::recv_in(const Unit& unit, std::uint64_t key, int src, std::uint64_t tag, void* data,
                   std::size_t bytes) {
  post(false, key, src, tag, data, bytes, unit);
}

void Flow::post(bool is_send, std::uint64_t key, int rank, std::uint64_t tag, void* data,
                std::size_t bytes, std::shared_ptr<int> unit_left) {
  {
    std::lock_guard lock(state_->mu);
    ++state_->in_transport;
    state_->pending.push_back(rank);
  }
  if (!unit_left) ++outstanding_;
  auto state = state_;
  const std::string what = what_;
  const std::uint64_t expected = bytes;
  Done done = [state, what, rank, is_send, expected, key, unit_left](const Status& s,
                                                                     std::uint64_t n, int) {
    std::lock_guard lock(state->mu);
    bool ok = s.ok();
    if (state->first.ok() && !s.ok()) {
      state->first = Status(s.code(),
                            what + ": " + (is_send ? "send to" : "receive from") + " rank " +
                                std::to_string(rank) + " failed: " + s.message(),
                            s.origin());
    } else if (ok && !is_send && n != expected) {
      ok = false;
      if (state->first.ok()) {
        state->first =
            Status(StatusCode::protocol_error,
                   what + ": rank " + std::to_string(rank) + " sent " + std::to_string(n) +
                       " bytes, expected " + std::to_string(expected) +
                       "; the ranks called the collective with different sizes");
      }
    }
    const auto it = std::find(state->pending.begin(), state->pending.end(), rank);
    if (it != state->pending.end()) state->pending.erase(it);
    --state->in_transport;
    // The unit's other transfer is still out: nobody needs waking (the last transfer of all, and
    // every failure, still notifies; abort() waits for in_transport == 0).
    const bool unit_open = unit_left && --*unit_left > 0;
    if (ok && unit_open && state->in_transport > 0) return;
    if (ok && !unit_open) state->finished.push_back(key);
    state->cv.notify_all();
  };
  ids_.push_back(is_send ? group_.send(rank, tag, data, bytes, priority_, std::move(done))
                         : group_.recv(rank, tag, data, bytes, std::move(done)));
}

void Flow::abort() {
  for (transport::RequestId id : ids_) group_.cancel(id);
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->in_transport == 0; });
  state_->finished.clear();
  outstanding_ = 0;
}

Result<std::uint64_t> Flow::next() {
  if (outstanding_ == 0) {
    return Status(StatusCode::internal, what_ + ": next() with nothing outstanding");
  }
  std::unique_lock lock(state_->mu);
  const bool ready = state_->cv.wait_until(
      lock, deadline_, [&] { return !state_->finished.empty() || !state_->first.ok(); });
  if (ready && state_->first.ok()) {
    const std::uint64_t key = state_->finished.front();
    state_->finished.pop_front();
    --outstanding_;
    return key;
  }
  Status error = state_->first;
  if (!ready) {
    std::string waiting;
    for (int r : state_->pending) waiting += (waiting.empty() ? "" : ", ") + std::to_string(r);
    error = Status(StatusCode::timeout,
                   what_ + " on rank " + std::to_string(group_.rank()) + " timed out after " +
                       std::to_string(group_.timeout().count()) + " ms waiting for rank(s) " +
                       waiting + "; a rank that never joined the collective, or a dead peer");
  }
  lock.unlock();
  abort();
  return error;
}

Status Flow::wait_all() {
  while (outstanding_ > 0) {
    Result<std::uint64_t> k = next();
    if (!k.ok()) return k.status();
  }
  return Status::Ok();
}

}  // namespace tictac::group
