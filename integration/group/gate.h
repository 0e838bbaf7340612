// Gate: a one-shot signal that holds a posted collective's transfers back until the data it
// sends is ready, while the collective keeps the place (ticket) it was posted in.
//
//   auto gate = std::make_shared<Gate>();
//   { GateScope scope(gate); backend.allgather(...); }   // posted now, in program order
//   ... later, on another thread: compute the input, then gate->open();
//
// ordered_ddp posts the all-gather of a parameter's updated shards at step(), on the training
// thread, so every rank posts it in the same order as its other collectives, and opens the gate
// from its updater thread once the shard's update is applied (docs/ddp.md). Without the gate the
// updater would have to post the collective itself, and its posts would interleave with the
// training thread's in a different order on each rank.
//
// Contract: open() and fail() may be called from any thread, any number of times; the first one
// decides. wait() blocks until then or until `timeout` and returns Ok only when the gate was
// opened; a failure returns the reason given to fail(), a timeout an error saying that the
// gate stayed closed. A collective waits for its gates on its collective thread before it reads
// its input (PendingGates below), so a gate must depend only on older collectives and local work
// (deadlock freedom: collective_scheduler.h). A ring all-gather or reduce-scatter posts its first
// step's receives before it waits: peers whose gates are open send at once, into this rank's
// output or scratch, never into its input, and nothing leaves this rank before its gates open.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace tictac::group {

class Gate {
 public:
  void open();
  void fail(std::string why);
  Status wait(std::chrono::milliseconds timeout) const;
  bool decided() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool decided_ = false;  // guarded by mu_
  Status result_;         // guarded by mu_
};

// The gates that collectives posted by this thread wait for: those of the enclosing scopes.
class GateScope {
 public:
  explicit GateScope(std::shared_ptr<Gate> gate);
  ~GateScope();
  GateScope(const GateScope&) = delete;
  GateScope& operator=(const GateScope&) = delete;

  static void push(std::shared_ptr<Gate> gate);
  static bool pop();  // false when no scope is open on this thread
  static std::vector<std::shared_ptr<Gate>> current();
};

// A collective's gates on the collective thread, installed for the time its body runs. The body
// calls wait() before it reads its input (a ring does so once its first receives are posted).
// Contract: per thread, the innermost PendingGates counts; wait() is idempotent and returns Ok at
// once when no PendingGates is installed or it has no gates; an error names the collective
// ("<what>: not started: <why>").
class PendingGates {
 public:
  PendingGates(std::vector<std::shared_ptr<Gate>> gates, std::chrono::milliseconds timeout,
               std::string what);
  ~PendingGates();
  PendingGates(const PendingGates&) = delete;
  PendingGates& operator=(const PendingGates&) = delete;

  static Status wait();
  // Whether the installed gates were waited for (true when none are installed).
  static bool waited();

 private:
  std::vector<std::shared_ptr<Gate>> gates_;
  std::chrono::milliseconds timeout_;
  std::string what_;
  bool waited_ = false;
  Status result_;
  PendingGates* outer_;
};

}  // namespace tictac::group
