// Rooted and personalised collectives over a Group: reduce, gather, scatter, all-to-all (with
// per-rank sizes). Same contract as Group's collectives: every rank calls the same ones in the
// same order from one thread; they block; sends leave with `priority`; on failure or timeout
// they cancel what they posted and return an error naming the ranks. `root` outside the group
// is invalid_argument (before any transfer, on every rank alike).
#pragma once

#include <cstddef>
#include <vector>

#include "common/status.h"
#include "integration/group/group.h"

namespace tictac::group {

// In place: on return the root's `data` holds the reduction over ranks; other ranks' `data` is
// scratch (the caller passes a copy when it must survive). Ring reduce-scatter, then every rank
// sends its reduced block to the root.
Status reduce(Group& g, void* data, std::size_t count, std::size_t elem_size,
              const ReduceFn& reduce, int root, transport::Priority priority);

// Root: out = concat over ranks r of `bytes[r]` bytes from rank r (its own copied locally).
// Others send `in_bytes` of `in`; `out` and `bytes` are read only on the root.
Status gather(Group& g, const void* in, std::size_t in_bytes, void* out,
              const std::vector<std::size_t>& bytes, int root, transport::Priority priority);

// Root: sends `bytes[r]` bytes at offset sum(bytes[<r]) of `in` to rank r (its own is copied).
// Every rank receives `out_bytes` into `out`.
Status scatter(Group& g, const void* in, const std::vector<std::size_t>& bytes, void* out,
               std::size_t out_bytes, int root, transport::Priority priority);

// Rank r sends send_bytes[d] bytes at send_offset[d] of `in` to every rank d and receives
// recv_bytes[s] bytes at recv_offset[s] of `out` from every rank s (itself by a copy). `in` and
// `out` must not overlap.
Status alltoallv(Group& g, const void* in, const std::vector<std::size_t>& send_offset,
                 const std::vector<std::size_t>& send_bytes, void* out,
                 const std::vector<std::size_t>& recv_offset,
                 const std::vector<std::size_t>& recv_bytes, transport::Priority priority);

}  // namespace tictac::group
