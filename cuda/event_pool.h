// A pre-allocated pool of CUDA events (timing disabled) for the progress loop.
//
// Contract: all events are created up front, so the loop never creates one; acquire() fails with
// resource_exhausted when every event is out (back-pressure: the caller retries after a poll has
// returned some). Events are recorded and queried (cudaEventQuery), never synchronised. An event
// may be released while a stream still waits on an earlier record of it: CUDA captures the
// record at cudaStreamWaitEvent time, so re-recording it later does not disturb that wait.
// Loop-confined: no internal locking. Destroying the pool destroys the events (set-up call).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "cuda/api.h"

namespace tictac::cuda {

class EventPool {
 public:
  static Result<std::unique_ptr<EventPool>> create(Api& api, int device, std::size_t capacity);
  // TICTAC_CUDA_EVENTS (default 1024); invalid_argument names a bad value.
  static Result<std::size_t> capacity_from_env();
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  Result<Event> acquire();
  void release(Event event);

  Api& api() const { return api_; }
  int device() const { return device_; }
  std::size_t capacity() const { return all_.size(); }
  std::size_t available() const { return free_.size(); }

 private:
  EventPool(Api& api, int device) : api_(api), device_(device) {}

  Api& api_;
  int device_;
  std::vector<Event> all_;
  std::vector<Event> free_;
};

}  // namespace tictac::cuda
