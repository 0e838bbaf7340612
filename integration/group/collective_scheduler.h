// CollectiveScheduler: runs a process group's collectives on a few threads, so that collectives
// that carry a priority can be in flight together and the transport's SendQueue lets a
// high-priority one overtake a big low-priority one at chunk granularity (docs/ddp.md).
//
//   CollectiveScheduler s("tictac-coll", 4);          // up to 4 collectives at once
//   s.post(/*concurrent=*/true, /*priority=*/5, [&](std::uint64_t ticket) {
//     Group::SeqScope scope(group, ticket);            // the same tags on every rank
//     group.allreduce(...);
//   });
//
// Contract:
//  - Every posted task gets a ticket: its index in posting order (0, 1, 2, ...). Collectives are
//    posted in the same order on every rank (c10d's rule), so a collective has the same ticket
//    on every rank; a task runs its collective under Group::SeqScope(ticket), which derives its
//    tags from the ticket and not from the order in which the threads happen to start it.
//  - Which task starts next. Tasks behind a fence (concurrent = false) never start before it;
//    a fence starts only when nothing runs, and nothing starts while it runs: an op without a
//    priority keeps the serial semantics of one collective thread. Among the concurrent tasks
//    ahead of the first pending fence:
//      * while fewer than `concurrency` tasks run, the one with the smallest priority starts
//        (ties: the oldest): a high-priority bucket launched last (ordered_ddp's first layers,
//        which backward produces last) does not queue behind every older one;
//      * while fewer than the urgent limit run (max(2 x `concurrency`, kUrgentLimit = 32)), a
//        task whose priority is smaller than every running task's starts too: it need not wait
//        for a slot held by lower-priority collectives, which the transport starves for its
//        sake anyway (with a limit of 2 x 4, ordered_ddp's first-layer buckets waited 100-300
//        ms for slots at the end of backward; docs/ddp.md);
//      * in addition, the oldest pending task starts whenever every running task is younger
//        than it (one spare thread for that), so at most the urgent limit + 1 run.
//    With equal priorities this is FIFO start with at most `concurrency` running, as before;
//    concurrency = 1 is exactly one collective thread in posting order (priorities ignored).
//  - Deadlock freedom (several rings share the connections, and ranks may start different
//    collectives at a moment): let X be the oldest collective unfinished on some rank. On a rank
//    where X has not started, everything older is finished, so X is the oldest pending task and
//    every running task is younger: if X is a fence nothing can run (younger tasks are behind
//    it), else the spare slot lets it start. So X starts on every rank where it is unfinished.
//    Its transfers do not wait for any other collective's (the transport moves data only into
//    posted receives or the bounded eager pool; rendezvous messages wait for their receive
//    without holding the window), so it completes, and by induction every collective does. This
//    holds whatever `concurrency`, priorities or timing each rank has.
//  - post() may be called from any thread (also from a task); tasks posted after shutdown()
//    began are dropped (false). shutdown() runs every task posted before it, then joins; not
//    from a task. The destructor calls shutdown().
#pragma once

#include <climits>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace tictac::group {

class CollectiveScheduler {
 public:
  using Task = std::function<void(std::uint64_t ticket)>;

  // `concurrency` >= 1 (values below 1 are taken as 1); above 1, urgent_limit() + 1 threads
  // (the urgent tasks' and the oldest task's slots; idle ones sleep on a condition variable).
  CollectiveScheduler(std::string name, int concurrency);
  ~CollectiveScheduler();
  CollectiveScheduler(const CollectiveScheduler&) = delete;
  CollectiveScheduler& operator=(const CollectiveScheduler&) = delete;

  // `priority`: smaller starts first among concurrent tasks (the transport's convention); the
  // two-argument form gives every task the same priority (FIFO start).
  bool post(bool concurrent, std::int64_t priority, Task task);
  bool post(bool concurrent, Task task) { return post(concurrent, kNoPriority, std::move(task)); }
  static constexpr std::int64_t kNoPriority = INT64_MAX;
  void shutdown();

  int concurrency() const { return concurrency_; }
  // Running tasks below which a more urgent task than all of them starts at once.
  int urgent_limit() const { return urgent_limit_; }
  static constexpr int kUrgentLimit = 32;
  // Counters: the most tasks seen running at once; tasks finished.
  int max_running() const;
  std::uint64_t finished() const;

  // TICTAC_COLL_CONCURRENCY (default kDefaultConcurrency), or an error naming the variable
  // when it is not an integer in [1, 64].
  static Result<int> configured_concurrency();
  static constexpr int kDefaultConcurrency = 4;

 private:
  struct Pending {
    bool concurrent;
    std::int64_t priority;
    std::uint64_t ticket;
    Task task;
  };
  // The pending task to start now, or pending_.end() (mu_ held).
  std::deque<Pending>::iterator next_to_start();
  void run(int index);

  std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;                     // guarded by mu_
  std::uint64_t next_ticket_ = 0;                   // guarded by mu_
  int running_ = 0;                                 // guarded by mu_
  std::multiset<std::uint64_t> running_tickets_;    // guarded by mu_
  std::multiset<std::int64_t> running_priorities_;  // guarded by mu_
  const int concurrency_;
  const int urgent_limit_;
  bool fence_running_ = false;  // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  int max_running_ = 0;         // guarded by mu_
  std::uint64_t finished_ = 0;  // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tictac::group
