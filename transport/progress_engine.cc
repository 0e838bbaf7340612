#include "transport/progress_engine.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/check.h"

namespace tictac::transport {
namespace {
constexpr std::uint64_t kWakeToken = 0;
constexpr int kIdleCapMs = 100;  // thread mode re-checks stop_ at least this often
}  // namespace

Result<std::unique_ptr<ProgressEngine>> ProgressEngine::create(Mode mode) {
  Result<std::chrono::microseconds> spin = spin_from_env();
  TICTAC_RETURN_IF_ERROR(spin);
  return create(mode, *spin);
}

Result<std::unique_ptr<ProgressEngine>> ProgressEngine::create(Mode mode,
                                                               std::chrono::microseconds spin) {
  const int epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0)
    return errno_status(StatusCode::unavailable, "cannot create the progress loop", "epoll_create1",
                        errno);
  const int evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (evfd < 0) {
    const int err = errno;
    close(epfd);
    return errno_status(StatusCode::unavailable, "cannot create the loop's wake-up eventfd",
                        "eventfd", err);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, evfd, &ev) != 0) {
    const int err = errno;
    close(evfd);
    close(epfd);
    return errno_status(StatusCode::unavailable, "cannot watch the wake-up eventfd", "epoll_ctl",
                        err);
  }
  std::unique_ptr<ProgressEngine> engine(new ProgressEngine(mode, epfd, evfd, spin));
  if (mode == Mode::thread) {
    engine->thread_ = std::thread([e = engine.get()] {
      // Named so that top -H, perf and /proc/<pid>/task/*/comm show which thread is the loop.
      ::pthread_setname_np(::pthread_self(), "tictac-loop");
      e->run();
    });
  }
  return engine;
}

ProgressEngine::ProgressEngine(Mode mode, int epfd, int evfd, std::chrono::microseconds spin)
    : mode_(mode), epfd_(epfd), evfd_(evfd), spin_(spin) {}

ProgressEngine::~ProgressEngine() {
  stop();
  join();
  std::vector<Posted> never_ran;
  take_inbox(never_ran);
  for (Posted& p : never_ran) {
    if (p.work != nullptr) p.work->drop_posted();
  }
  close(evfd_);
  close(epfd_);
}

void ProgressEngine::post(Task task) {
  if (stop_.load()) return;
  if (on_loop_thread()) {
    // From a handler or callback: runs with the inbox's tasks, with no allocation or atomics.
    local_.push_back(Posted{std::move(task), nullptr});
    return;
  }
  push_inbox(new TaskNode(std::move(task)));
}

void ProgressEngine::post(PostedWork* work) {
  if (stop_.load()) {
    work->drop_posted();
    return;
  }
  if (on_loop_thread()) {
    local_.push_back(Posted{Task{}, work});
    return;
  }
  push_inbox(work);
}

void ProgressEngine::push_inbox(PostedWork* node) {
  // Once the exchange succeeds the loop may take and free `node`: only `head` is read after it.
  PostedWork* head = inbox_head_.load(std::memory_order_relaxed);
  do {
    node->posted_next_ = head;
  } while (!inbox_head_.compare_exchange_weak(head, node, std::memory_order_seq_cst,
                                              std::memory_order_relaxed));
  const bool was_empty = head == nullptr;
  // The loop thread checks the inbox before it blocks, and so does a spinning loop (see the
  // header's note on inbox_nonempty_/spinning_): only a loop that may be asleep needs the eventfd.
  if (was_empty && !spinning_.load(std::memory_order_seq_cst)) {
    const std::uint64_t one = 1;
    // A full eventfd counter (EAGAIN) still wakes the loop; nothing else can fail here.
    [[maybe_unused]] ssize_t n = write(evfd_, &one, sizeof one);
  }
}

void ProgressEngine::stop() {
  stop_.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(evfd_, &one, sizeof one);
}

void ProgressEngine::join() {
  if (thread_.joinable()) {
    TICTAC_CHECK(std::this_thread::get_id() != thread_.get_id(),
                 "join() called on the loop thread");
    thread_.join();
  }
}

bool ProgressEngine::on_loop_thread() const {
  return loop_thread_id_.load() == std::this_thread::get_id();
}

void ProgressEngine::run() {
  loop_thread_id_.store(std::this_thread::get_id());
  while (!stop_.load()) iterate(next_timeout_ms(kIdleCapMs));
}

std::size_t ProgressEngine::progress(std::chrono::milliseconds timeout) {
  TICTAC_CHECK(mode_ == Mode::manual,
               "progress() is for manual mode; thread mode runs its own loop");
  loop_thread_id_.store(std::this_thread::get_id());
  if (stop_.load()) return 0;
  return iterate(next_timeout_ms(static_cast<int>(timeout.count())));
}

int ProgressEngine::next_timeout_ms(int cap_ms) const {
  if (inbox_pending() || !local_.empty()) return 0;
  if (!deferred_.empty()) return 0;
  if (timers_.empty()) return cap_ms;
  // Round up: a timer due in 0.3 ms must not turn into a busy loop of zero-timeout waits.
  const auto wait =
      std::chrono::ceil<std::chrono::milliseconds>(timers_.begin()->first - Clock::now());
  if (wait.count() <= 0) return 0;
  return static_cast<int>(std::min<std::int64_t>(wait.count(), cap_ms));
}

ProgressEngine::PollerId ProgressEngine::add_poller(std::function<bool()> poll,
                                                    std::function<bool()> before_sleep) {
  const PollerId id = next_poller_++;
  pollers_.push_back(Poller{id, std::move(poll), std::move(before_sleep)});
  return id;
}

void ProgressEngine::remove_poller(PollerId id) {
  std::erase_if(pollers_, [id](const Poller& p) { return p.id == id; });
}

bool ProgressEngine::before_sleep() {
  bool pending = false;
  for (std::size_t i = 0; i < pollers_.size(); ++i) {  // index loop: a hook may remove pollers
    auto hook = pollers_[i].before_sleep;              // copy: it may remove itself
    if (hook && hook()) pending = true;
  }
  return pending;
}

int ProgressEngine::spin(int timeout_ms, epoll_event* events, int max_events, bool* work) {
  *work = false;
  const auto budget = spin_.budget();
  if (budget.count() == 0 || timeout_ms == 0) return 0;
  const auto start = Clock::now();
  auto deadline = start + budget;
  if (timeout_ms > 0) deadline = std::min(deadline, start + std::chrono::milliseconds(timeout_ms));
  spinning_.store(true, std::memory_order_seq_cst);
  int n = 0;
  for (;;) {
    if (inbox_pending()) {
      *work = true;
      break;
    }
    // Index loop: a poller may add or remove pollers. A poller may run sink work inline.
    dispatching_ = true;
    for (std::size_t i = 0; i < pollers_.size() && !*work; ++i) {
      auto poll = pollers_[i].poll;  // copy: it may remove itself
      *work = poll();
    }
    dispatching_ = false;
    if (*work) break;
    // Only fds that no poller covers need the syscall (the inbox is checked above).
    if (unpolled_watches_ > 0 || pollers_.empty()) {
      ++stats_.spin_epolls;
      n = epoll_wait(epfd_, events, max_events, 0);
      if (n > 0) break;
    }
    n = 0;
    if (Clock::now() >= deadline) break;
  }
  // Leaving the spin: from here on posters must write the eventfd; re-check the inbox after the
  // store so that a post that saw spinning_ == true is not missed.
  spinning_.store(false, std::memory_order_seq_cst);
  if (n == 0 && !*work && inbox_pending()) *work = true;
  const bool hit = n > 0 || *work;
  spin_.spun(hit);
  ++(hit ? stats_.hits : stats_.misses);
  return n;
}

std::size_t ProgressEngine::iterate(int timeout_ms) {
  std::size_t work = 0;
  epoll_event events[64];
  bool polled = false;
  int n = spin(timeout_ms, events, 64, &polled);
  // Pollers re-arm their event fds once, here, rather than after every burst of work.
  if (n == 0 && !polled && timeout_ms != 0 && before_sleep()) polled = true;
  if (n == 0 && !polled) {
    const auto before = Clock::now();
    n = epoll_wait(epfd_, events, 64, timeout_ms);
    if (timeout_ms != 0) {
      ++stats_.sleeps;
      spin_.slept(Clock::now() - before, n > 0);
    }
  }
  if (polled) ++work;
  dispatching_ = true;
  work += dispatch(events, n, /*then_deferred=*/true);
  work += run_posted();
  work += run_due_timers();
  work += run_deferred();
  dispatching_ = false;
  return work;
}

std::size_t ProgressEngine::dispatch(const epoll_event* events, int n, bool then_deferred) {
  std::size_t work = 0;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t token = events[i].data.u64;
    if (token == kWakeToken) {
      std::uint64_t v;
      [[maybe_unused]] ssize_t r = read(evfd_, &v, sizeof v);
      continue;
    }
    auto it = watches_.find(token);
    if (it == watches_.end()) continue;  // unwatched earlier in this batch
    auto handler = it->second.handler;   // copy: the handler may unwatch itself
    handler(events[i].events);
    ++work;
    if (then_deferred) run_deferred();
  }
  return work;
}

std::size_t ProgressEngine::run_posted() {
  std::vector<Posted> own;
  std::vector<Posted>& tasks = running_posted_ ? own : posted_batch_;
  take_inbox(tasks);
  const bool outer = !running_posted_;
  running_posted_ = true;
  for (Posted& t : tasks) run(t);
  const std::size_t n = tasks.size();
  tasks.clear();
  if (outer) running_posted_ = false;
  return n;
}

std::size_t ProgressEngine::run_due_timers() {
  std::size_t work = 0;
  const auto now = Clock::now();
  while (!timers_.empty() && timers_.begin()->first <= now) {
    const TimerId id = timers_.begin()->second;
    auto tt = timer_tasks_.find(id);
    Task t = std::move(tt->second.second);
    timers_.erase(timers_.begin());
    timer_tasks_.erase(tt);
    t();
    ++work;
  }
  return work;
}

std::size_t ProgressEngine::run_deferred() {
  // Deferred work may defer more (a flush whose completions pump the next chunks, whose posts
  // schedule the next flush ...); it always ends on a finite amount of state, and runs to its end
  // in this iteration. Every kDeferredPerPoll tasks the rest of an iteration runs once in
  // between, without waiting: draining without that let a sender whose socket never fills
  // (loopback, a fast receiver) starve every incoming frame, and every task its callbacks posted,
  // until its stream ended.
  std::size_t n = 0;
  std::size_t since_poll = 0;
  while (!deferred_.empty()) {
    Task t = std::move(deferred_.front());
    deferred_.pop_front();
    t();
    ++n;
    if (++since_poll == kDeferredPerPoll && !deferred_.empty()) {
      since_poll = 0;
      n += serve_between_deferred();
    }
  }
  return n;
}

std::size_t ProgressEngine::serve_between_deferred() {
  std::size_t n = 0;
  for (std::size_t i = 0; i < pollers_.size(); ++i) {  // index loop: a poller may remove pollers
    auto poll = pollers_[i].poll;                      // copy: it may remove itself
    if (poll()) ++n;
  }
  epoll_event events[64];
  const int ready = epoll_wait(epfd_, events, 64, 0);
  n += dispatch(events, ready, /*then_deferred=*/false);  // what they defer joins the drain
  n += run_posted();
  n += run_due_timers();
  return n;
}

void ProgressEngine::take_inbox(std::vector<Posted>& out) {
  // The loop thread's own posts first, then the inbox's (no order between threads is promised).
  if (out.empty()) {
    out.swap(local_);
  } else {
    for (Posted& t : local_) out.push_back(std::move(t));
    local_.clear();
  }
  if (!inbox_pending()) return;
  PostedWork* node = inbox_head_.exchange(nullptr, std::memory_order_seq_cst);
  std::size_t n = 0;
  for (PostedWork* p = node; p != nullptr; p = p->posted_next_) ++n;
  // Newest first: filled from the back to restore the posting order.
  const std::size_t base = out.size();
  out.resize(base + n);
  for (std::size_t i = base + n; node != nullptr; --i) {
    PostedWork* next = node->posted_next_;
    out[i - 1] = Posted{Task{}, node};
    node = next;
  }
}

void ProgressEngine::defer(Task task) { deferred_.push_back(std::move(task)); }

ProgressEngine::DeferredCallId ProgressEngine::add_deferred_call(Task task) {
  const DeferredCallId id = next_deferred_call_++;
  deferred_calls_.emplace(id, std::move(task));
  return id;
}

void ProgressEngine::defer_call(DeferredCallId id) {
  defer([this, id] {
    auto it = deferred_calls_.find(id);
    if (it == deferred_calls_.end()) return;  // removed since it was queued
    Task t = it->second;                      // a copy: the task may remove itself while it runs
    t();
  });
}

void ProgressEngine::remove_deferred_call(DeferredCallId id) { deferred_calls_.erase(id); }

Status ProgressEngine::watch(int fd, std::uint32_t events,
                             std::function<void(std::uint32_t)> handler) {
  return add_watch(fd, events, std::move(handler), /*polled=*/false);
}

Status ProgressEngine::watch_polled(int fd, std::uint32_t events,
                                    std::function<void(std::uint32_t)> handler) {
  return add_watch(fd, events, std::move(handler), /*polled=*/true);
}

Status ProgressEngine::add_watch(int fd, std::uint32_t events,
                                 std::function<void(std::uint32_t)> handler, bool polled) {
  const std::uint64_t token = next_token_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = token;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return errno_status(StatusCode::internal, "cannot watch a socket", "epoll_ctl(ADD)", errno);
  }
  watches_.emplace(token, Watch{fd, std::move(handler), polled});
  token_of_fd_[fd] = token;
  if (!polled) ++unpolled_watches_;
  return Status::Ok();
}

Status ProgressEngine::rearm(int fd, std::uint32_t events) {
  auto it = token_of_fd_.find(fd);
  if (it == token_of_fd_.end()) return internal_error("rearm of an fd that is not watched");
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = it->second;
  if (epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) != 0) {
    return errno_status(StatusCode::internal, "cannot change a socket's events", "epoll_ctl(MOD)",
                        errno);
  }
  return Status::Ok();
}

void ProgressEngine::unwatch(int fd) {
  auto it = token_of_fd_.find(fd);
  if (it == token_of_fd_.end()) return;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  auto w = watches_.find(it->second);
  if (w != watches_.end() && !w->second.polled) --unpolled_watches_;
  watches_.erase(it->second);
  token_of_fd_.erase(it);
}

ProgressEngine::TimerId ProgressEngine::add_timer(Clock::time_point when, Task task) {
  const TimerId id = next_timer_++;
  auto it = timers_.emplace(when, id);
  timer_tasks_.emplace(id, std::make_pair(it, std::move(task)));
  return id;
}

void ProgressEngine::cancel_timer(TimerId id) {
  auto it = timer_tasks_.find(id);
  if (it == timer_tasks_.end()) return;
  timers_.erase(it->second.first);
  timer_tasks_.erase(it);
}

}  // namespace tictac::transport
