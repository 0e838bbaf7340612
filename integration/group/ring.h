// Ring collectives over a Group, chunked and pipelined: reduce-scatter, allgather and allreduce
// (reduce-scatter then allgather in one pass). Every block is split into chunks of about
// kRingChunkBytes; each chunk runs its own ring (n-1 or 2(n-1) steps), and a chunk moves to its
// next step as soon as its own send and receive of this step finished (one Flow::exchange: the
// collective thread wakes once per chunk and step, not once per transfer) and, in
// reduce-scatter, its received piece is reduced, so reductions overlap the transfers of the
// other chunks. Each
// rank sends (n-1)/n of the data per phase: bandwidth-optimal.
//
// Buffers are the caller's (no flatten through a second buffer); reduce-scatter needs one
// block of scratch (not zeroed). Calls follow Group's collective contract (same order on every rank, one
// collective thread, blocking, error naming the ranks).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "integration/group/group.h"

namespace tictac::group {

inline constexpr std::size_t kRingChunkBytes = std::size_t{1} << 20;  // TICTAC_RING_CHUNK_BYTES
inline constexpr int kRingMaxChunks = 32;                             // per block
// Reduce-scatter posts each step's receive a step early (into a second scratch slot) when the
// two slots take at most this much (TICTAC_RING_EARLY_SCRATCH_BYTES); above it, only allgather
// receives go early.
inline constexpr std::size_t kRingEarlyScratchBytes = std::size_t{64} << 20;

// Called once by a ring after its first step's receives are posted and before it sends or reads
// its input (a gated collective waits for its gates there: PendingGates, gate.h). An error ends
// the collective with it (the posted receives are cancelled). Empty: no such point.
using BeforeSend = std::function<Status()>;

// Block r of a buffer: elements [begin[r], begin[r] + len[r]).
struct Blocks {
  std::vector<std::size_t> begin;
  std::vector<std::size_t> len;
  // `count` elements split n ways as evenly as possible (the first count % n get one more).
  static Blocks even(std::size_t count, int n);
  // n blocks of `len` elements laid end to end.
  static Blocks equal(std::size_t len, int n);
  std::size_t max_len() const;
};

// On return block rank() of `data` holds the reduction over ranks of their block rank(); the
// other blocks are left partly reduced (scratch).
Status ring_reduce_scatter(Group& g, void* data, const Blocks& blocks, std::size_t elem_size,
                           const ReduceFn& reduce, transport::Priority priority,
                           const std::string& what);
// Out of place: `in` (blocks laid out as in ring_reduce_scatter) is only read; on return `out`
// (blocks.len[rank()] elements, not overlapping `in`) holds the reduction over ranks of their
// block rank(). `reduce` must be commutative (it folds `in` into the received partial sum). Two
// or three blocks of scratch (three when receives go a step early, within
// kRingEarlyScratchBytes), from the group's pool: no copy of the input. `last_reduce`, when
// given, folds the last step's piece into `out` instead of `reduce` (an average divides there,
// in the same pass, instead of in a pass of its own afterwards).
Status ring_reduce_scatter_into(Group& g, const void* in, void* out, const Blocks& blocks,
                                std::size_t elem_size, const ReduceFn& reduce,
                                transport::Priority priority, const std::string& what,
                                const BeforeSend& before_send = {},
                                const ReduceFn* last_reduce = nullptr);
// Block rank() of `data` is this rank's input; on return every block holds its rank's input.
// The receives posted before `before_send` land in block rank() - 1, never in block rank().
Status ring_allgather(Group& g, void* data, const Blocks& blocks, std::size_t elem_size,
                      transport::Priority priority, const std::string& what,
                      const BeforeSend& before_send = {});
// In-place allreduce of `count` elements.
Status ring_allreduce(Group& g, void* data, std::size_t count, std::size_t elem_size,
                      const ReduceFn& reduce, transport::Priority priority,
                      const std::string& what);

}  // namespace tictac::group
