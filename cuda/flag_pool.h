// A fixed pool of host-mapped 32-bit sequence flags for stream waits (cuStreamWaitValue32).
//
// Layout: one pinned, device-mapped slab; flag i owns the 64-byte line i (one cache line, so the
// host's stores to one flag never share a line with another flag the GPU polls). Word 0 of the
// line is the sequence, word 1 the error word (0, or kFlagErrorSentinel after a failure).
//
// Sequences: each flag counts its uses. issue() returns the next value (last issued + 1, wrapping
// modulo 2^32); a wait for it is satisfied by the GPU's cyclic comparison
// (int32_t)(flag - target) >= 0 once the host stores that value. Stores use release ordering, so
// data the host (or a NIC, ordered before the host observed its completion) wrote earlier is
// visible before the flag.
//
// Contract: loop-confined (no internal locking); acquire() fails with resource_exhausted when
// every flag is in use or retired. Retired flags (a wait that timed out) are never reused: a
// stream may still hold a wait on them. The pool must outlive every stream wait enqueued on its
// flags; destroying it frees the slab with cudaFreeHost (a set-up call that may block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda/api.h"

namespace tictac::cuda {

inline constexpr std::size_t kFlagLineBytes = 64;
// Written into the error word when a wait is released because its arrival failed or timed out.
inline constexpr std::uint32_t kFlagErrorSentinel = 0xBADF1A60u;

class FlagPool {
 public:
  // Allocates `capacity` flags, each holding `initial_sequence` (tests start near the wrap).
  static Result<std::unique_ptr<FlagPool>> create(Api& api, std::size_t capacity,
                                                  std::uint32_t initial_sequence = 0);
  ~FlagPool();
  FlagPool(const FlagPool&) = delete;
  FlagPool& operator=(const FlagPool&) = delete;

  Result<std::uint32_t> acquire();
  void release(std::uint32_t index);
  void retire(std::uint32_t index);

  // Advances the flag's issued sequence and returns it (the value a new wait targets).
  std::uint32_t issue(std::uint32_t index);
  void store_sequence(std::uint32_t index, std::uint32_t value);
  void store_error(std::uint32_t index, std::uint32_t value);
  std::uint32_t load_sequence(std::uint32_t index) const;
  std::uint32_t load_error(std::uint32_t index) const;
  DevicePtr device_sequence_address(std::uint32_t index) const;
  DevicePtr device_error_address(std::uint32_t index) const;

  std::size_t capacity() const { return state_.size(); }
  std::size_t in_use() const;
  std::size_t retired() const { return retired_; }

 private:
  enum class State : std::uint8_t { free, in_use, retired };
  FlagPool(Api& api, HostMapping slab, std::size_t capacity, std::uint32_t initial);
  std::uint32_t* word(std::uint32_t index, int which) const;

  Api& api_;
  HostMapping slab_;
  std::vector<State> state_;
  std::vector<std::uint32_t> issued_;
  std::vector<std::uint32_t> free_;  // stack of free indices
  std::size_t retired_ = 0;
};

}  // namespace tictac::cuda
