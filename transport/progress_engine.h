// ProgressEngine: the loop that owns all transport state of one Context.
//
// Threading: in thread mode the engine runs its own loop thread; in manual mode nothing runs
// until a caller invokes progress(), and that caller is the loop thread for the duration of the
// call (deterministic tests). Everything below "loop thread only" must be called on the loop
// thread; post() is the only entry from other threads: a thread-safe inbox (a mutex guards the
// task list, nothing else) plus an eventfd that wakes the loop from epoll_wait.
// Blocking: the loop blocks only in epoll_wait, bounded by the next timer. Tasks and handlers must
// not block. Errors: create() reports failing syscalls (epoll_create1, eventfd) as Status.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/status.h"

namespace tictac::transport {

using Task = std::function<void()>;
using Clock = std::chrono::steady_clock;

class ProgressEngine {
 public:
  enum class Mode { thread, manual };

  static Result<std::unique_ptr<ProgressEngine>> create(Mode mode);
  ~ProgressEngine();  // stop() + join(); drops tasks that never ran
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  Mode mode() const { return mode_; }

  // Any thread: runs `task` on the loop thread, in posting order. Tasks posted after stop() are
  // dropped. Never blocks (beyond the inbox mutex).
  void post(Task task);
  // Any thread: asks the loop to exit after the current iteration.
  void stop();
  // Thread mode: waits until the loop thread exited. Must not be called on the loop thread.
  void join();
  bool stopped() const { return stop_.load(); }

  // Manual mode, one driving thread: runs one iteration, waiting up to `timeout` for events when
  // there is nothing to do. Returns the number of handlers, tasks and timers that ran.
  std::size_t progress(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  // --- loop thread only ---
  bool on_loop_thread() const;
  // True while the loop is running handlers/tasks/timers (a caller inside a callback).
  bool dispatching() const { return dispatching_; }
  // Runs `task` later in the current iteration, after the current handler returns.
  void defer(Task task);
  // Watches fd for `events` (EPOLLIN/EPOLLOUT...). The handler gets the returned events.
  Status watch(int fd, std::uint32_t events, std::function<void(std::uint32_t)> handler);
  Status rearm(int fd, std::uint32_t events);
  // Stops watching; pending events for fd in the current batch are not delivered.
  void unwatch(int fd);
  using TimerId = std::uint64_t;
  TimerId add_timer(Clock::time_point when, Task task);
  void cancel_timer(TimerId id);

 private:
  ProgressEngine(Mode mode, int epfd, int evfd);
  void run();
  std::size_t iterate(int timeout_ms);
  int next_timeout_ms(int cap_ms) const;

  const Mode mode_;
  const int epfd_;
  const int evfd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<std::thread::id> loop_thread_id_{};

  mutable std::mutex inbox_mutex_;  // guards inbox_ only
  std::deque<Task> inbox_;

  bool dispatching_ = false;
  std::deque<Task> deferred_;
  struct Watch {
    int fd;
    std::function<void(std::uint32_t)> handler;
  };
  std::uint64_t next_token_ = 1;
  std::unordered_map<std::uint64_t, Watch> watches_;   // token -> watch
  std::unordered_map<int, std::uint64_t> token_of_fd_;
  TimerId next_timer_ = 1;
  std::multimap<Clock::time_point, TimerId> timers_;
  std::unordered_map<TimerId, std::pair<std::multimap<Clock::time_point, TimerId>::iterator, Task>>
      timer_tasks_;
};

}  // namespace tictac::transport
