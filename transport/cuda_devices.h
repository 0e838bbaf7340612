// CudaDevices: a Context's CUDA state: the API table and, per device, the pools the progress loop
// uses for device buffers (an EventPool, a SendGate, a StagingPool and a StreamCompletion whose
// side stream is the staging pool's, so fallback completion events follow the staging copies).
//
// Contract: the table is the injected one (ContextOptions::cuda_api, not owned: tests pass the
// scripted fake) or, when none was given, open_runtime_api() opened on first use. prepare() is
// the set-up call: it may block (driver start-up, pinned allocations, stream and event creation),
// so it runs on the user's thread when a device buffer is registered or submitted, never on the
// progress loop. get() never blocks and is what the loop calls. Thread-safe (one mutex guards the
// table pointer and the map; a device's pools, once created, are used by the loop and, for the
// producer gate and the consumer stream's wait, by the submitting thread (CudaDevice::mutex).
// Devices are never removed before destruction, which destroys the pools (set-up calls).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "common/status.h"
#include "cuda/api.h"
#include "cuda/event_pool.h"
#include "cuda/send_gate.h"
#include "cuda/staging_pool.h"
#include "cuda/stream_completion.h"
#include "transport/shadow_pool.h"

namespace tictac::transport {

struct CudaDevice {
  int device = 0;
  std::chrono::nanoseconds arrival_timeout{};  // TICTAC_CUDA_ARRIVAL_TIMEOUT
  // Guards the four pools below (they share the event pool): Context::submit enqueues a send's
  // producer gate or a receive's stream wait on the caller's thread (enqueue_at_submit), the
  // loop does the rest. Held only around single pool calls, never across a callback.
  std::mutex mutex;
  // Destroyed in reverse order: completion and staging before the events they use.
  std::unique_ptr<cuda::EventPool> events;
  std::unique_ptr<cuda::SendGate> gate;
  std::unique_ptr<cuda::StagingPool> staging;
  std::unique_ptr<cuda::StreamCompletion> arrivals;
  // Host shadows of staged transfers, reused (loop thread only; not under `mutex`).
  std::unique_ptr<ShadowPool> shadows;
};

class CudaDevices {
 public:
  // `injected` is not owned and must outlive this object; null = open the runtime on first use.
  explicit CudaDevices(cuda::Api* injected) : api_(injected) {}
  CudaDevices(const CudaDevices&) = delete;
  CudaDevices& operator=(const CudaDevices&) = delete;

  // The table (opened now if needed; may block).
  cuda::Api& api();
  // The device's pools, created on first call from the TICTAC_CUDA_* tunables (may block).
  // Errors: the table's "CUDA not viable: <reason>" status, invalid_argument for a bad device or
  // tunable, or the creation's error, naming the device.
  Result<CudaDevice*> prepare(int device);
  // The device's pools when prepare() succeeded for it, else null. Never blocks.
  CudaDevice* get(int device);

 private:
  cuda::Api& api_locked();

  std::mutex mutex_;
  cuda::Api* api_;
  std::unique_ptr<cuda::Api> owned_;
  std::map<int, std::unique_ptr<CudaDevice>> devices_;
};

}  // namespace tictac::transport
