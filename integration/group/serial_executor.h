// SerialExecutor: one thread that runs posted tasks in order. The torch backend uses one for
// collectives (which block), one for completions (so user future callbacks never run on the
// transport's loop thread) and one for CUDA staging.
// post() may be called from any thread, also from a task; tasks posted after shutdown() began
// are dropped. The destructor runs every task posted before it, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tictac::group {

class SerialExecutor {
 public:
  explicit SerialExecutor(std::string name);
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // False (and the task is dropped) once shutdown has begun.
  bool post(std::function<void()> task);
  // Runs what is queued, then stops the thread. Idempotent; not from a task.
  void shutdown();

 private:
  void run();

  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::thread thread_;
};

}  // namespace tictac::group
