// Host shadows of staged device transfers, reused instead of allocated per message.
//
// A staged device send or receive (transport/cuda_path.h) holds a host copy of the whole message.
// Allocating it per message made every transfer above glibc's mmap threshold (at most 32 MiB)
// map fresh pages and fault each one in on first touch, then unmap them: on an H200 host a
// 64 MiB device-to-device transfer over tcp ran at 0.54 GB/s against 3.6 GB/s host-to-host, and
// its speed did not change with the staging piece size or count (docs/cuda.md, "Staged
// bandwidth"). The pool keeps released shadows (touched pages) for the next message.
//
// Contract: loop-confined (one thread; no locks). take(bytes) returns a buffer of at least
// `bytes` (the smallest cached one that fits if it is at most twice the size, else a new one);
// a Shadow returns its buffer to the pool when it goes, and the pool keeps at most
// `max_cached_bytes` (TICTAC_CUDA_SHADOW_CACHE, default 256 MiB; 0 = no reuse), dropping the
// largest cached buffers first. The pool must outlive every Shadow taken from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "common/status.h"

namespace tictac::transport {

class ShadowPool;

// One host shadow: data() holds capacity() >= the bytes asked for. Movable, not copyable.
class Shadow {
 public:
  Shadow() = default;
  Shadow(Shadow&& other) noexcept { *this = std::move(other); }
  Shadow& operator=(Shadow&& other) noexcept;
  Shadow(const Shadow&) = delete;
  Shadow& operator=(const Shadow&) = delete;
  ~Shadow() { reset(); }

  std::byte* data() const { return data_.get(); }
  std::size_t capacity() const { return capacity_; }
  explicit operator bool() const { return data_ != nullptr; }
  void reset();  // back to the pool (or freed)

 private:
  friend class ShadowPool;
  std::unique_ptr<std::byte[]> data_;
  std::size_t capacity_ = 0;
  ShadowPool* pool_ = nullptr;
};

class ShadowPool {
 public:
  explicit ShadowPool(std::size_t max_cached_bytes) : max_cached_(max_cached_bytes) {}
  // TICTAC_CUDA_SHADOW_CACHE (bytes, K/M/G suffixes); invalid_argument names a bad value.
  static Result<std::size_t> cache_bytes_from_env();

  Shadow take(std::size_t bytes);

  std::size_t cached_bytes() const { return cached_; }
  std::uint64_t reused() const { return reused_; }        // takes served from the cache
  std::uint64_t allocated() const { return allocated_; }  // takes that allocated

 private:
  friend class Shadow;
  void give(std::unique_ptr<std::byte[]> data, std::size_t capacity);

  std::size_t max_cached_;
  std::size_t cached_ = 0;
  std::uint64_t reused_ = 0;
  std::uint64_t allocated_ = 0;
  std::multimap<std::size_t, std::unique_ptr<std::byte[]>> free_;  // by capacity
};

}  // namespace tictac::transport
