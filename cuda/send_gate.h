// Send side of CUDA stream-aware completion: "start this transfer after the producer's work".
//
// after_producer(stream) records a pooled event on the producer stream now and returns an id;
// the transfer of that device buffer may be posted only once poll() has released the id. poll()
// queries events (cudaEventQuery) and never synchronises; events of one stream fire in order, so
// it stops querying a stream at its first pending event. Releases come back in submission order
// per stream. An event that fails its query releases its id with the cuda_error status (fail that
// transfer). cancel(id) drops a gate whose transfer is no longer wanted (endpoint failed); its
// event returns to the pool when it fires.
//
// Contract: loop-confined, no locks, non-blocking. after_producer fails with resource_exhausted
// when the event pool is empty (back-pressure: keep the transfer queued and retry after a poll),
// with cuda_error when the record fails. The EventPool must outlive the gate; pending events are
// returned to the pool when the gate is destroyed.
#pragma once

#include <cstdint>
#include <vector>

#include "cuda/event_pool.h"

namespace tictac::cuda {

struct GateRelease {
  std::uint64_t id = 0;
  Status status;  // ok: the producer's work is done, post the transfer
};

class SendGate {
 public:
  explicit SendGate(EventPool& events) : events_(events) {}
  ~SendGate();
  SendGate(const SendGate&) = delete;
  SendGate& operator=(const SendGate&) = delete;

  Result<std::uint64_t> after_producer(Stream producer);
  std::vector<GateRelease> poll();
  // invalid_argument when the id is not pending.
  Status cancel(std::uint64_t id);
  std::size_t pending() const { return entries_.size(); }

 private:
  struct Entry {
    std::uint64_t id;
    Stream stream;
    Event event;
    bool cancelled;
  };

  EventPool& events_;
  std::uint64_t next_id_ = 1;
  std::vector<Entry> entries_;  // submission order
};

}  // namespace tictac::cuda
