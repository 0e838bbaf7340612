// CollectiveScheduler: runs a process group's collectives on a few threads, so that collectives
// that carry a priority can be in flight together and the transport's SendQueue lets a
// high-priority one overtake a big low-priority one at chunk granularity (docs/ddp.md).
//
//   CollectiveScheduler s("tictac-coll", 4);          // up to 4 collectives at once
//   s.post(/*concurrent=*/true, [&](std::uint64_t ticket) {
//     Group::SeqScope scope(group, ticket);            // the same tags on every rank
//     group.allreduce(...);
//   });
//
// Contract:
//  - Every posted task gets a ticket: its index in posting order (0, 1, 2, ...). Collectives are
//    posted in the same order on every rank (c10d's rule), so a collective has the same ticket
//    on every rank; a task runs its collective under Group::SeqScope(ticket), which derives its
//    tags from the ticket and not from the order in which the threads happen to start it.
//  - Tasks START in posting order (FIFO). A concurrent task starts once no fence runs and fewer
//    than `concurrency` tasks run. A fence (concurrent = false) starts only when nothing runs,
//    and nothing starts while it runs: an op without a priority keeps the serial semantics of
//    one collective thread. concurrency = 1 is exactly one collective thread.
//  - Deadlock freedom (several rings share the connections): the oldest collective that is
//    unfinished on some rank has started on every rank where it is unfinished (FIFO start: a
//    task that is not started has an unfinished older one running). Its transfers do not wait
//    for any other collective's (the transport moves data only into posted receives or the
//    bounded eager pool; rendezvous messages wait for their receive without holding the window),
//    so it completes, and by induction every collective does. This holds whatever `concurrency`
//    or fence decisions each rank made; they may differ between ranks.
//  - post() may be called from any thread (also from a task); tasks posted after shutdown()
//    began are dropped (false). shutdown() runs every task posted before it, then joins; not
//    from a task. The destructor calls shutdown().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace tictac::group {

class CollectiveScheduler {
 public:
  using Task = std::function<void(std::uint64_t ticket)>;

  // `concurrency` >= 1 threads (values below 1 are taken as 1).
  CollectiveScheduler(std::string name, int concurrency);
  ~CollectiveScheduler();
  CollectiveScheduler(const CollectiveScheduler&) = delete;
  CollectiveScheduler& operator=(const CollectiveScheduler&) = delete;

  bool post(bool concurrent, Task task);
  void shutdown();

  int concurrency() const { return static_cast<int>(threads_.size()); }
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
    std::uint64_t ticket;
    Task task;
  };
  bool startable() const;  // mu_ held
  void run(int index);

  std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> pending_;    // guarded by mu_
  std::uint64_t next_ticket_ = 0;  // guarded by mu_
  int running_ = 0;                // guarded by mu_
  bool fence_running_ = false;     // guarded by mu_
  bool stopping_ = false;          // guarded by mu_
  int max_running_ = 0;            // guarded by mu_
  std::uint64_t finished_ = 0;     // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace tictac::group
