// ScratchPool: reusable host buffers for the temporary data of collectives (the ring's receive
// slots), so that a collective does not map and fault in fresh pages on every call. A 64 MiB
// allreduce needs a block of scratch (32 MiB at 2 ranks); allocated per call, glibc serves it
// with mmap above its threshold (at most 32 MiB) and the kernel zeroes every page on first touch
// (8192 faults per call at 2 ranks: tictac's ring ran at 0.80x gloo's bus bandwidth there).
//
// acquire(bytes) returns a Lease on a buffer of at least `bytes` bytes (contents undefined): the
// smallest free buffer that fits, else a new one. The Lease returns it on destruction. At most
// kMaxFree buffers and kMaxFreeBytes bytes are kept free; a returned buffer beyond either bound is
// released to the system. Thread-safe (collectives run on several threads at once); a buffer is
// used by its lease holder alone.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace tictac::group {

class ScratchPool {
 public:
  static constexpr std::size_t kMaxFree = 4;
  static constexpr std::size_t kMaxFreeBytes = std::size_t{256} << 20;

  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t bytes = 0;
  };

  class Lease {
   public:
    Lease() = default;
    Lease(ScratchPool* pool, Buffer buffer) : pool_(pool), buffer_(std::move(buffer)) {}
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    std::byte* data() const { return buffer_.data.get(); }
    std::size_t bytes() const { return buffer_.bytes; }

   private:
    void give_back();
    ScratchPool* pool_ = nullptr;
    Buffer buffer_;
  };

  Lease acquire(std::size_t bytes);

  // For tests and stats: buffers allocated so far, and buffers kept free now.
  std::size_t allocations() const;
  std::size_t free_buffers() const;

 private:
  void release(Buffer buffer);

  mutable std::mutex mu_;
  std::vector<Buffer> free_;
  std::size_t free_bytes_ = 0;
  std::size_t allocations_ = 0;
};

}  // namespace tictac::group
