// The CUDA API table: every CUDA call the layer makes goes through this interface.
//
// Contract:
// - Three implementations: the real one (cuda/runtime_api.h: CUDA runtime linked statically,
//   driver entry points resolved at run time, never -lcuda), the unavailable one
//   (make_unavailable_api: every request fails with the "CUDA not viable: <reason>" status) and
//   a scripted fake in tests/unit/cuda/ that models streams, events and flag waits on the host.
// - Handles are opaque: Stream is a CUstream/cudaStream_t (nullptr = the legacy default stream),
//   Event a CUevent/cudaEvent_t, DevicePtr a CUdeviceptr. No CUDA header is needed to use this.
// - Errors: a non-viable table answers StatusCode::unavailable; a failing CUDA call answers
//   StatusCode::cuda_error naming the call and the CUDA error; bad arguments invalid_argument.
//   Nothing here throws or aborts on a CUDA failure.
// - Blocking: only create_*/destroy_*/alloc_*/free_* may block (they are set-up calls). Every
//   enqueue call (wait_value32, memcpy_async, record_event, stream_wait_event) and event_fired
//   return without waiting for the device, so the progress loop may call them.
// - Thread safety: the real table is safe to call from any thread (the CUDA runtime is);
//   objects built on top of it are loop-confined and say so in their own headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tictac::cuda {

using Stream = void*;
using Event = void*;
using DevicePtr = std::uint64_t;

enum class MemoryType : std::uint8_t {
  host,         // plain pageable host memory (or CUDA not viable)
  pinned_host,  // page-locked host memory known to CUDA (cudaHostAlloc / cudaHostRegister)
  device,       // device memory (cudaMalloc, cuMemCreate + map)
  managed,      // unified memory (cudaMallocManaged)
};
std::string_view to_string(MemoryType type);

struct PointerInfo {
  MemoryType type = MemoryType::host;
  int device = -1;               // device ordinal; -1 for host memory
  std::uint64_t range_start = 0;  // allocation containing the pointer; 0 when unknown
  std::uint64_t range_size = 0;
};

// Pinned host memory: the host address and, when mapped, the address the device uses for it.
struct HostMapping {
  void* host = nullptr;
  DevicePtr device = 0;  // 0 when not mapped
  std::size_t bytes = 0;
};

struct DeviceCaps {
  bool stream_mem_ops = false;          // cuStreamWaitValue32 usable on this device
  bool can_flush_remote_writes = false;  // CU_STREAM_WAIT_VALUE_FLUSH supported
  bool dma_buf = false;                 // cuMemGetHandleForAddressRange(DMA_BUF_FD) supported
  bool gpudirect_rdma = false;          // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
  // CUDA's lazy module loading is on for this process (cuModuleGetLoadingMode; CUDA_MODULE_LOADING
  // =LAZY is the default since CUDA 12.2). Then the first launch of a kernel while any stream waits
  // on a stream memory operation blocks in the driver, holding the context lock, until that wait
  // ends: seen on an H200 (driver 580), where it deadlocked the copy meant to end the wait.
  bool lazy_module_loading = false;
};

class Api {
 public:
  virtual ~Api() = default;

  // ok when CUDA is usable; otherwise unavailable with "CUDA not viable: <reason>".
  virtual const Status& viability() const = 0;
  virtual int device_count() const = 0;
  virtual Result<DeviceCaps> device_caps(int device) = 0;
  // Makes the device's primary context current on the calling thread (cheap when it already is).
  virtual Status use_device(int device) = 0;

  // Memory. pointer_info answers host for plain pointers and whenever CUDA is not viable.
  virtual Result<PointerInfo> pointer_info(const void* ptr) = 0;
  // Page-locked host memory, portable across devices; mapped into the device address space
  // when `mapped` (then HostMapping::device is set). Page-aligned.
  virtual Result<HostMapping> alloc_pinned(std::size_t bytes, bool mapped) = 0;
  virtual Status free_pinned(void* host) = 0;

  // Streams (created non-blocking with respect to the legacy default stream).
  virtual Result<Stream> create_stream() = 0;
  virtual Status destroy_stream(Stream stream) = 0;
  // Enqueues "wait until (int32_t)(*addr - value) >= 0" (CU_STREAM_WAIT_VALUE_GEQ, a cyclic
  // comparison); `flush` adds CU_STREAM_WAIT_VALUE_FLUSH for GPUDirect writes on pre-Hopper GPUs.
  virtual Status wait_value32(Stream stream, DevicePtr addr, std::uint32_t value, bool flush) = 0;
  // Enqueues a copy (direction inferred from the pointers, cudaMemcpyDefault).
  virtual Status memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream) = 0;

  // Events (created with timing disabled).
  virtual Result<Event> create_event() = 0;
  virtual Status destroy_event(Event event) = 0;
  virtual Status record_event(Event event, Stream stream) = 0;
  // true once the work captured by the last record has completed, false while pending; never
  // blocks (cudaEventQuery).
  virtual Result<bool> event_fired(Event event) = 0;
  // Enqueues on `stream` a wait for the work captured by the event's most recent record.
  virtual Status stream_wait_event(Stream stream, Event event) = 0;

  // GPUDirect: a dma-buf file descriptor for a page-aligned device range (caller closes it).
  virtual Result<int> dmabuf_fd(DevicePtr aligned_ptr, std::size_t aligned_bytes) = 0;
};

// A table whose viability() is `reason` (an unavailable Status) and whose every request fails
// with it; pointer_info answers host. Used when the toolkit, driver or device is missing.
std::unique_ptr<Api> make_unavailable_api(Status reason);

// One line for `tictac info` and logs: "CUDA viable: 1 device(s); device 0: stream memory
// operations yes, dma-buf yes, GPUDirect RDMA yes" or the not-viable reason.
std::string describe(Api& api);

// "CUDA not viable: <why>" as an unavailable Status.
Status not_viable(std::string_view why);

}  // namespace tictac::cuda
