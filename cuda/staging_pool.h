// Host staging for backends that cannot touch GPU memory (TCP, UCX without CUDA): a reusable pool
// of pinned host buffers and a side stream; every copy is ordered by events, none is waited on.
//
// Send:    copy_to_host(src, n, producer) records a pooled event on the producer stream, makes the
//          side stream wait on it, copies n bytes device->host into a free buffer and records a
//          completion event. poll() hands the buffer out (StagingDone, to_host) once that event
//          fired; the caller sends from it and then release()s it.
// Receive: acquire() lends a buffer to receive into; copy_to_device(buf, n, dst, consumer) copies
//          it host->device on the side stream, records an event and makes the consumer stream
//          wait on it, so the consumer is ordered after the copy at once. The buffer returns to the
//          pool by itself when poll() sees the copy's event fire (StagingDone, to_device).
//
// Contract: loop-confined, no locks, non-blocking. Buffers: free -> lent (acquire, or handed out
// by poll for a send) -> release(); lent -> copying (copy_to_device) -> free. Errors:
// resource_exhausted when no buffer or event is free (back-pressure: retry after a poll);
// invalid_argument for zero or oversized copies (chunks must fit one buffer) and for buffers not
// lent to the caller; cuda_error from an enqueue. A buffer whose copy was enqueued but whose
// completion event could not be recorded is retired rather than reused. The EventPool must
// outlive the pool; destroying the pool destroys the side stream and frees the buffers (set-up
// calls that may block); no copy may be in flight then.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/api.h"
#include "cuda/event_pool.h"

namespace tictac::cuda {

struct StagingOptions {
  int device = 0;
  std::size_t buffers = 8;                  // TICTAC_CUDA_STAGING_BUFFERS
  std::size_t buffer_bytes = 4u << 20;      // TICTAC_CUDA_STAGING_BYTES
  static Result<StagingOptions> from_env(int device);
};

struct StagingBuffer {
  std::uint32_t index = 0;
  void* host = nullptr;
  std::size_t capacity = 0;
};

struct StagingDone {
  enum class Kind : std::uint8_t { to_host, to_device };
  std::uint64_t id = 0;
  Kind kind = Kind::to_host;
  StagingBuffer buffer;  // to_host: now lent to the caller, holding `bytes`
  std::size_t bytes = 0;
  Status status;
};

class StagingPool {
 public:
  static Result<std::unique_ptr<StagingPool>> create(Api& api, EventPool& events, const StagingOptions& options);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  Stream side_stream() const { return side_; }
  std::size_t available() const { return free_.size(); }
  std::size_t buffer_bytes() const { return options_.buffer_bytes; }

  Result<std::uint64_t> copy_to_host(const void* src, std::size_t bytes, Stream producer);
  // The same when the producer's work is known to be done (a SendGate released it): the copy is
  // ordered after no stream, so later work on the producer stream cannot delay it.
  Result<std::uint64_t> copy_to_host_after_gate(const void* src, std::size_t bytes);
  Result<StagingBuffer> acquire();
  Result<std::uint64_t> copy_to_device(const StagingBuffer& buffer, std::size_t bytes, void* dst, Stream consumer);
  Status release(const StagingBuffer& buffer);
  std::vector<StagingDone> poll();

 private:
  enum class State : std::uint8_t { free, lent, copying, retired };
  struct Copy {
    std::uint64_t id;
    StagingDone::Kind kind;
    std::uint32_t buffer;
    std::size_t bytes;
    Event event;
    bool report;
  };

  StagingPool(Api& api, EventPool& events, const StagingOptions& options) : api_(api), events_(events), options_(options) {}
  StagingBuffer buffer(std::uint32_t index) const;
  // copy_to_host with the side stream ordered after `producer` (null: after nothing).
  Result<std::uint64_t> stage_to_host(const void* src, std::size_t bytes, const Stream* producer);
  Status check_size(std::size_t bytes) const;
  Status check_lent(const StagingBuffer& b) const;

  Api& api_;
  EventPool& events_;
  StagingOptions options_;
  Stream side_ = nullptr;
  HostMapping slab_;
  std::vector<State> state_;
  std::vector<std::uint32_t> free_;
  std::vector<Copy> copies_;  // in side-stream order
  std::uint64_t next_id_ = 1;
};

}  // namespace tictac::cuda
