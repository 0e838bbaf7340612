// Group: N ranks joined by the transport, the layer under the framework adapters (the c10d
// backend, the TF ops). It gives rank-addressed point-to-point transfers with tags and
// priorities, and blocking collectives built on them.
//
//   auto g = Group::create(store, {.rank = r, .size = n, .key_prefix = "pg0/"});
//   g->send(1, user_tag(7), buf, bytes, priority, done);        // async, done on the loop thread
//   g->allreduce(buf, count, sizeof(float), sum_floats);        // blocking
//
// Point-to-point: send/recv never block and never call `done` inline; `done` runs exactly once
// on the transport's loop thread and must not block. Messages between two ranks with one tag
// arrive in send order. recv from kAnyRank reports the source rank. A dead peer fails every
// pending and later request on it with connection_lost naming the rank.
// Collectives: every rank calls the same collectives in the same order, from one thread at a
// time (the adapter's collective thread), or from several threads at once when each runs
// under a SeqScope with the collective's ticket (collective_scheduler.h). They block until
// done or the group timeout, and on a timeout or peer failure cancel what they posted and
// return an error naming the ranks involved; buffers are never touched after they return.
// Buffers: the caller keeps them alive until `done` fires (p2p) or the call returns.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "integration/group/priority_table.h"
#include "integration/group/rank_mesh.h"
#include "integration/group/scratch_pool.h"
#include "transport/bootstrap/store.h"
#include "transport/context.h"

namespace tictac::group {

inline constexpr int kAnyRank = -1;
// Collective traffic goes ahead of every scheduled parameter transfer.
inline constexpr transport::Priority kCollectivePriority = -(std::int64_t{1} << 62);

struct GroupOptions {
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{30'000};  // connect and collective timeout
  std::string listen_address;                 // empty = choose_listen_address()
  // Backend preference list ("ucx,tcp"); empty = TICTAC_BACKENDS (backend_choice.h). Each
  // backend listens on listen_address's host (the first on its port too, the others on any).
  std::string backends;
  std::string key_prefix;                     // store keys and handshake identity
  std::optional<transport::TransportConfig> config;  // empty = TICTAC_* environment
  // CUDA table for device buffers (not owned, must outlive the group; tests pass the scripted
  // fake). Null = the real runtime, opened on the first device registration.
  cuda::Api* cuda_api = nullptr;
};

// (status, bytes moved, source rank)
using Done = std::function<void(const Status&, std::uint64_t, int)>;
// acc[i] = op(acc[i], in[i]) for i < count elements.
using ReduceFn = std::function<void(void* acc, const void* in, std::size_t count)>;

class Group {
 public:
  static Result<std::unique_ptr<Group>> create(bootstrap::Store& store, GroupOptions options);
  ~Group();  // close()
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return options_.rank; }
  int size() const { return options_.size; }
  std::chrono::milliseconds timeout() const { return options_.timeout; }
  const std::string& address() const { return mesh_->address(); }
  // Every address this rank published (one per backend, preference order, ','-joined).
  const std::string& addresses() const { return mesh_->addresses(); }
  // The backend ("tcp", "ucx", ...) the connection to `rank` runs over; "" for this rank.
  const std::string& backend_of(int rank) const { return mesh_->backend_of(rank); }
  PriorityTable& priorities() { return priorities_; }
  // Reusable buffers for collectives' temporary data (scratch_pool.h); thread-safe.
  ScratchPool& scratch() { return scratch_; }

  // Point-to-point. An invalid rank (self, out of range) completes `done` with
  // invalid_argument, asynchronously like every other outcome.
  transport::RequestId send(int dst, std::uint64_t tag, const void* data, std::size_t bytes,
                            transport::Priority priority, Done done);
  transport::RequestId recv(int src, std::uint64_t tag, void* data, std::size_t bytes, Done done);
  void cancel(transport::RequestId id);

  // Device buffers (transport/cuda_path.h): a CUDA region whose transfers are ordered by
  // `stream` (a cudaStream_t; nullptr = the legacy default stream). A send starts only after the
  // work enqueued on the stream before send_region(); a receive makes the stream wait at once,
  // and work enqueued on it afterwards runs only once every byte is on the device. Backends
  // without GPU memory support stage through pinned host buffers. May block (driver start-up,
  // pools): call from the user's thread, never from a `done`. Errors: unavailable
  // "CUDA not viable: <reason>" on a machine without a usable GPU, invalid_argument for memory
  // that is not device memory of `device`.
  Result<std::shared_ptr<transport::MemoryRegion>> register_device(void* data, std::size_t bytes,
                                                                   int device, void* stream);
  // p2p on a registered region (host or device); the group keeps `region` alive until `done`.
  // For a device region the stream ordering above holds from the moment they return: the
  // transport enqueues the stream wait and the producer gate on this thread (also in a batch).
  transport::RequestId send_region(int dst, std::uint64_t tag,
                                   std::shared_ptr<transport::MemoryRegion> region,
                                   transport::Priority priority, Done done);
  transport::RequestId recv_region(int src, std::uint64_t tag,
                                   std::shared_ptr<transport::MemoryRegion> region, Done done);
  // Batches (transport::Context::begin_batch/end_batch): this thread's send/recv/cancel calls
  // between them reach the transport's loop as one task, so its send queue orders every send of
  // the batch before the first chunk leaves. They nest; other threads are not affected.
  void begin_batch();
  void end_batch();

  // Collectives (blocking); their sends leave with `priority`. More in ring.h and rooted.h.
  Status barrier(transport::Priority priority = kCollectivePriority);
  Status broadcast(void* data, std::size_t bytes, int root,
                   transport::Priority priority = kCollectivePriority);
  // Chunked, pipelined ring reduce-scatter + allgather over `count` elements (ring.h).
  Status allreduce(void* data, std::size_t count, std::size_t elem_size, const ReduceFn& reduce,
                   transport::Priority priority = kCollectivePriority);
  // out = concat over ranks of each rank's `bytes` bytes of `in`.
  Status allgather(const void* in, std::size_t bytes, void* out,
                   transport::Priority priority = kCollectivePriority);

  // The sequence number of the next collective (its tags). Every collective takes one or more,
  // the same on every rank. Inside a SeqScope on this thread the numbers derive from the scope's
  // ticket (scope.h: kScopedSeqBit | ticket << 8 | i for the scope's i-th, at most 256), so
  // collectives running on several threads at once take the same numbers on every rank;
  // outside one they come from the group's own counter (one collective thread at a time).
  std::uint64_t next_collective_seq();

  // Marks this thread as running the collective that every rank gave `ticket` (its index in the
  // group's posting order, collective_scheduler.h) until destroyed. One per thread at a time.
  class SeqScope {
   public:
    SeqScope(Group& group, std::uint64_t ticket);
    ~SeqScope();
    SeqScope(const SeqScope&) = delete;
    SeqScope& operator=(const SeqScope&) = delete;
  };

  // Cancels everything pending and closes connections; idempotent.
  void close();

 private:
  Group(GroupOptions options, std::unique_ptr<transport::Context> context);
  std::string describe_rank(int rank) const;

  GroupOptions options_;
  std::unique_ptr<transport::Context> context_;
  std::unique_ptr<RankMesh> mesh_;
  PriorityTable priorities_;
  ScratchPool scratch_;
  std::uint64_t collective_seq_ = 0;  // collective thread only
  bool closed_ = false;
};

}  // namespace tictac::group
