#include "transport/cuda_devices.h"

#include <string>
#include <utility>

#include "cuda/runtime_api.h"

namespace tictac::transport {

cuda::Api& CudaDevices::api_locked() {
  if (api_ == nullptr) {
    owned_ = cuda::open_runtime_api();
    api_ = owned_.get();
  }
  return *api_;
}

cuda::Api& CudaDevices::api() {
  std::lock_guard<std::mutex> lock(mutex_);
  return api_locked();
}

Result<CudaDevice*> CudaDevices::prepare(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = devices_.find(device);
  if (it != devices_.end()) return it->second.get();
  cuda::Api& api = api_locked();
  TICTAC_RETURN_IF_ERROR(api.viability());
  const std::string where = "preparing CUDA device " + std::to_string(device) + " for transfers";
  if (device < 0 || device >= api.device_count()) {
    return invalid_argument(where + ": no such device (this process sees " +
                            std::to_string(api.device_count()) + ")");
  }
  auto d = std::make_unique<CudaDevice>();
  d->device = device;
  Result<std::size_t> events = cuda::EventPool::capacity_from_env();
  if (!events.ok()) return events.status();
  Result<std::unique_ptr<cuda::EventPool>> pool = cuda::EventPool::create(api, device, *events);
  if (!pool.ok()) return pool.status().with_context(where);
  d->events = std::move(pool).value();
  d->gate = std::make_unique<cuda::SendGate>(*d->events);
  Result<cuda::StagingOptions> so = cuda::StagingOptions::from_env(device);
  if (!so.ok()) return so.status();
  Result<std::unique_ptr<cuda::StagingPool>> staging = cuda::StagingPool::create(api, *d->events, *so);
  if (!staging.ok()) return staging.status().with_context(where);
  d->staging = std::move(staging).value();
  Result<cuda::StreamCompletionOptions> co = cuda::StreamCompletionOptions::from_env(device);
  if (!co.ok()) return co.status();
  co->side_stream = d->staging->side_stream();
  d->arrival_timeout = co->timeout;
  co->flush_remote_writes = true;  // applied only where the device needs it (GPUDirect writes)
  Result<std::unique_ptr<cuda::StreamCompletion>> arrivals = cuda::StreamCompletion::create(api, *d->events, *co);
  if (!arrivals.ok()) return arrivals.status().with_context(where);
  d->arrivals = std::move(arrivals).value();
  Result<std::size_t> shadow_cache = ShadowPool::cache_bytes_from_env();
  if (!shadow_cache.ok()) return shadow_cache.status();
  d->shadows = std::make_unique<ShadowPool>(*shadow_cache);
  CudaDevice* out = d.get();
  devices_.emplace(device, std::move(d));
  return out;
}

CudaDevice* CudaDevices::get(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : it->second.get();
}

}  // namespace tictac::transport
