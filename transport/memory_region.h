// MemoryRegion: a registered buffer that transfers read from or write into.
//
// Move-only: a region owns its registration (backends that need one, such as verbs, attach their
// handles to it) but never the memory itself: the caller keeps the buffer and the region alive
// until every request that uses them has completed (its callback has fired). Host memory is
// supported; CUDA device memory carries its device and stream (the stream belongs to the buffer:
// sends start after the work enqueued on it, and work enqueued on it after a receive waits for
// the bytes). Device regions are made by register_device (Context::register_buffer calls it with
// the context's CUDA table), which checks the pointer against the driver.
// Not thread-safe to mutate; const use from several threads is fine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "cuda/api.h"

namespace tictac::transport {

enum class MemoryType : std::uint8_t { host, cuda };

struct BufferDesc {
  void* data = nullptr;
  std::size_t bytes = 0;
  MemoryType type = MemoryType::host;
  int cuda_device = -1;           // cuda only
  void* cuda_stream = nullptr;    // cuda only: a cudaStream_t; nullptr = the legacy default stream
};

class MemoryRegion {
 public:
  // Registers a host buffer. Errors: invalid_argument for a null pointer with a non-zero size,
  // and for CUDA memory (the message says to use Context::register_buffer).
  static Result<MemoryRegion> register_buffer(const BufferDesc& desc);
  // Registers a CUDA buffer (desc.type == cuda) checked with `api` (cuda::describe_buffer): it
  // must be device or managed memory, lie inside its allocation, and sit on desc.cuda_device
  // (-1 = take the device the driver reports). Errors: the table's unavailable status
  // "CUDA not viable: <reason>"; invalid_argument for host memory, a device mismatch, a range past
  // its allocation or a host desc; cuda_error from the pointer query.
  static Result<MemoryRegion> register_device(const BufferDesc& desc, cuda::Api& api);
  // Shorthand for host memory.
  static Result<MemoryRegion> host(void* data, std::size_t bytes);

  MemoryRegion(MemoryRegion&& other) noexcept;
  MemoryRegion& operator=(MemoryRegion&& other) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion() = default;

  std::byte* data() const { return static_cast<std::byte*>(desc_.data); }
  std::size_t size() const { return desc_.bytes; }
  MemoryType type() const { return desc_.type; }
  const BufferDesc& desc() const { return desc_; }

  // invalid_argument unless [offset, offset+length) lies inside the region.
  Status check_range(std::uint64_t offset, std::uint64_t length) const;

 private:
  explicit MemoryRegion(const BufferDesc& desc) : desc_(desc) {}
  BufferDesc desc_;
};

}  // namespace tictac::transport
