// ProgressEngine: the loop that owns all transport state of one Context.
//
// Threading: in thread mode the engine runs its own loop thread; in manual mode nothing runs
// until a caller invokes progress(), and that caller is the loop thread for the duration of the
// call (deterministic tests). Everything below "loop thread only" must be called on the loop
// thread; post() is the only entry from other threads: a lock-free inbox (a multi-producer,
// single-consumer list: posters push with one compare-and-swap, the loop takes the whole list
// with one exchange and runs it in posting order) plus an eventfd that wakes the loop from
// epoll_wait. The eventfd is written only when the loop may be asleep: not for posts from the
// loop thread itself, nor while the loop is spinning (it checks the inbox on every round), nor
// when the inbox already held a task (whoever posted that one took care of the wake-up).
// Blocking: the loop blocks only in epoll_wait, bounded by the next timer. Before blocking it may
// spin (SpinPolicy, TICTAC_SPIN_US): call the pollers, check the inbox and epoll_wait(0) until work
// shows up or the adaptive budget runs out. Tasks, handlers and pollers must not block.
// Errors: create() reports failing syscalls (epoll_create1, eventfd) and a malformed
// TICTAC_SPIN_US as Status.
#pragma once

#include <sys/epoll.h>

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
#include <vector>

#include "common/status.h"
#include "transport/spin_policy.h"

namespace tictac::transport {

using Task = std::function<void()>;
using Clock = std::chrono::steady_clock;

// Work posted without a Task: an owning, intrusive item, so that posting it allocates nothing
// beyond the item itself (a submitted request). ProgressEngine::post(PostedWork*) takes ownership;
// on the loop thread, in posting order with the posted Tasks, run_posted() is called and the item
// then belongs to whatever run_posted() did with it. An item that never runs (posted after stop(),
// or still queued when the engine is destroyed) gets drop_posted() instead, on that thread.
class PostedWork {
 public:
  virtual ~PostedWork() = default;
  virtual void run_posted() = 0;
  virtual void drop_posted() = 0;

 private:
  friend class ProgressEngine;
  PostedWork* posted_next_ = nullptr;  // the inbox's link
};

class ProgressEngine {
 public:
  enum class Mode { thread, manual };

  // The spin maximum comes from TICTAC_SPIN_US (spin_from_env()).
  static Result<std::unique_ptr<ProgressEngine>> create(Mode mode);
  // Explicit spin maximum (0 = never spin).
  static Result<std::unique_ptr<ProgressEngine>> create(Mode mode, std::chrono::microseconds spin);
  ~ProgressEngine();  // stop() + join(); drops tasks that never ran
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  Mode mode() const { return mode_; }

  // Any thread: runs `task` on the loop thread, in posting order. Tasks posted after stop() are
  // dropped. Never blocks and takes no lock (one allocation, one compare-and-swap; from the loop
  // thread itself, a plain queue).
  void post(Task task);
  // Any thread: post() of an owning item (PostedWork above); no allocation, same order.
  void post(PostedWork* work);
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
  // Runs `task` later in the current iteration, after the current handler returns. Deferred
  // work that defers more runs to its end in the same iteration, but every kDeferredPerPoll
  // deferred tasks the loop serves everything else once without waiting (pollers, ready fds,
  // posted tasks, due timers): a long chain of deferred work cannot starve incoming events.
  void defer(Task task);
  static constexpr std::size_t kDeferredPerPoll = 64;
  // A deferred call registered once and queued by id, for work its owner defers again and again
  // (an endpoint's flush): defer_call(id) is defer() of the registered task without allocating,
  // provided the task is small (a lambda capturing `this`: std::function then copies it in place).
  // remove_deferred_call(id) (the owner's destructor) drops it, with any run of it still queued.
  using DeferredCallId = std::uint64_t;
  DeferredCallId add_deferred_call(Task task);
  void defer_call(DeferredCallId id);
  void remove_deferred_call(DeferredCallId id);
  // True when deferred or posted tasks wait: a handler that could go on working (a poller's pump)
  // returns instead, so that, for example, a reply its sink just posted goes out first.
  bool tasks_waiting() const { return !deferred_.empty() || !local_.empty() || inbox_pending(); }
  // Watches fd for `events` (EPOLLIN/EPOLLOUT...). The handler gets the returned events.
  Status watch(int fd, std::uint32_t events, std::function<void(std::uint32_t)> handler);
  // As watch(), for an fd whose readiness a poller (below) also discovers. While every watched fd
  // is such a one, a spin round calls only the pollers and skips its epoll_wait(0).
  Status watch_polled(int fd, std::uint32_t events, std::function<void(std::uint32_t)> handler);
  Status rearm(int fd, std::uint32_t events);
  // Stops watching; pending events for fd in the current batch are not delivered.
  void unwatch(int fd);
  // Pollers run on every spin round (a backend that can be polled cheaper or sooner than its fd
  // says, e.g. ucp_worker_progress); true = found work (the loop then dispatches at once). A
  // poller may run its own sink work inline (dispatching() is true meanwhile) or defer it.
  // `before_sleep` (optional) runs before the loop blocks in epoll_wait: the place to re-arm an
  // event fd (ucp_worker_arm) once, instead of after every burst of work; true = work is pending,
  // so the loop must not block (it iterates again). remove_poller() takes effect before the next
  // round.
  using PollerId = std::uint64_t;
  PollerId add_poller(std::function<bool()> poll, std::function<bool()> before_sleep = nullptr);
  void remove_poller(PollerId id);
  std::chrono::microseconds spin_max() const { return spin_.max(); }
  struct SpinStats {
    std::uint64_t hits = 0;    // spins that found work
    std::uint64_t misses = 0;  // spins whose budget ran out
    std::uint64_t sleeps = 0;  // blocking epoll_waits
    std::uint64_t spin_epolls =
        0;  // epoll_wait(0) calls while spinning (none if pollers cover all)
  };
  SpinStats spin_stats() const { return stats_; }
  using TimerId = std::uint64_t;
  TimerId add_timer(Clock::time_point when, Task task);
  void cancel_timer(TimerId id);

 private:
  ProgressEngine(Mode mode, int epfd, int evfd, std::chrono::microseconds spin);
  void run();
  std::size_t iterate(int timeout_ms);
  // Spins for up to the policy's budget (bounded by timeout_ms); returns the epoll events found
  // (written to `events`), or 0 with *work telling whether a poller or the inbox has work.
  int spin(int timeout_ms, epoll_event* events, int max_events, bool* work);
  bool inbox_pending() const { return inbox_head_.load(std::memory_order_seq_cst) != nullptr; }
  // A Task posted from another thread travels the inbox as an item of its own.
  struct TaskNode final : PostedWork {
    explicit TaskNode(Task t) : task(std::move(t)) {}
    void run_posted() override {
      std::unique_ptr<TaskNode> self(this);
      task();
    }
    void drop_posted() override { delete this; }
    Task task;
  };
  // A posted task or item, in a batch (local_, posted_batch_): exactly one of the two is set.
  struct Posted {
    Task task;
    PostedWork* work = nullptr;
  };
  // Pushes `node` on the inbox and wakes the loop if it may sleep (any thread).
  void push_inbox(PostedWork* node);
  // Runs or drops one batch entry.
  static void run(Posted& p) {
    if (p.work != nullptr) {
      p.work->run_posted();
    } else {
      p.task();
    }
  }
  // Appends every posted task to `out`, oldest first (loop thread): the loop's own posts, then the
  // inbox's. Reuses `out`'s and local_'s storage, so that steady posting allocates nothing here.
  void take_inbox(std::vector<Posted>& out);
  int next_timeout_ms(int cap_ms) const;
  Status add_watch(int fd, std::uint32_t events, std::function<void(std::uint32_t)> handler,
                   bool polled);

  const Mode mode_;
  const int epfd_;
  const int evfd_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::atomic<std::thread::id> loop_thread_id_{};

  // The inbox: posted tasks, newest first (a stack; take_inbox() reverses it). Posters push with
  // a seq_cst compare-and-swap and then read spinning_; the loop stores spinning_ = false and then
  // reads the head, both seq_cst: either the poster sees the loop not spinning and wakes it, or
  // the loop sees the task.
  std::atomic<PostedWork*> inbox_head_{nullptr};
  std::atomic<bool> spinning_{false};

  SpinPolicy spin_;
  SpinStats stats_;
  PollerId next_poller_ = 1;
  struct Poller {
    PollerId id;
    std::function<bool()> poll;
    std::function<bool()> before_sleep;
  };
  std::vector<Poller> pollers_;
  // Runs the pollers' before_sleep hooks; true when one has work pending.
  bool before_sleep();

  bool dispatching_ = false;
  std::deque<Task> deferred_;
  std::unordered_map<DeferredCallId, Task> deferred_calls_;
  DeferredCallId next_deferred_call_ = 1;
  // Runs deferred tasks until none is left, serving the rest of the loop in between (see
  // defer()); returns how many tasks, handlers and timers ran.
  std::size_t run_deferred();
  // One non-blocking round of everything but deferred work: every poller once, the handlers of
  // the fds that are ready, posted tasks, due timers. Returns how many found or did work.
  std::size_t serve_between_deferred();
  // Runs the handlers of `n` ready events (reads the wake eventfd); after each, the deferred
  // work when `then_deferred`.
  std::size_t dispatch(const epoll_event* events, int n, bool then_deferred);
  std::size_t run_posted();      // the inbox's and the loop's own posted tasks, in order
  std::size_t run_due_timers();  // timers whose time has come
  std::vector<Posted> local_;    // post() from the loop thread: taken with the inbox
  std::vector<Posted> posted_batch_;  // run_posted()'s batch, kept for its capacity
  bool running_posted_ = false;     // a task that runs the loop (manual mode) gets its own batch
  struct Watch {
    int fd;
    std::function<void(std::uint32_t)> handler;
    bool polled;  // watch_polled(): a poller also discovers its readiness
  };
  std::size_t unpolled_watches_ = 0;  // watches a spin round must epoll_wait for
  std::uint64_t next_token_ = 1;
  std::unordered_map<std::uint64_t, Watch> watches_;  // token -> watch
  std::unordered_map<int, std::uint64_t> token_of_fd_;
  TimerId next_timer_ = 1;
  std::multimap<Clock::time_point, TimerId> timers_;
  std::unordered_map<TimerId, std::pair<std::multimap<Clock::time_point, TimerId>::iterator, Task>>
      timer_tasks_;
};

}  // namespace tictac::transport
