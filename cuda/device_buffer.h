// A user buffer as the transport sees it: address, size, memory type, device and stream.
//
// Contract: DeviceBuffer does not own the memory; the caller keeps it alive (and, for device
// memory, does not free it) until the transfer using it has completed. `stream` is the stream
// that orders the buffer's producer (send) or consumer (receive) work; nullptr means the legacy
// default stream for device memory and "no stream" for host memory. describe_buffer() detects
// the memory type from pointer attributes; when CUDA is not viable every pointer is host memory
// and a request that names a stream fails with the not-viable status. Plain value type:
// thread-safe to copy; describe_buffer is as thread-safe as the Api it is given.
#pragma once

#include <cstddef>
#include <string>

#include "cuda/api.h"

namespace tictac::cuda {

struct DeviceBuffer {
  void* ptr = nullptr;
  std::size_t size = 0;
  MemoryType type = MemoryType::host;
  int device = -1;  // -1 for host and pinned host memory
  Stream stream = nullptr;

  // The GPU has to be involved to read or write it (device or managed memory).
  bool on_device() const { return type == MemoryType::device || type == MemoryType::managed; }
  // "device 0 buffer of 4096 bytes at 0x..." for error messages.
  std::string describe() const;
};

// Classifies [ptr, ptr + size). Errors: invalid_argument for a null pointer with a non-zero size
// or a range that runs past the CUDA allocation holding `ptr`; the Api's status when a stream is
// given but CUDA is not viable; cuda_error when the pointer query fails.
Result<DeviceBuffer> describe_buffer(Api& api, void* ptr, std::size_t size, Stream stream = nullptr);

}  // namespace tictac::cuda
