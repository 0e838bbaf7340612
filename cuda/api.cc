// Shared pieces of the API table and the table used when CUDA is not viable.
#include "cuda/api.h"

#include <utility>

namespace tictac::cuda {

std::string_view to_string(MemoryType type) {
  switch (type) {
    case MemoryType::host: return "host";
    case MemoryType::pinned_host: return "pinned_host";
    case MemoryType::device: return "device";
    case MemoryType::managed: return "managed";
  }
  return "unknown";
}

Status not_viable(std::string_view why) {
  std::string msg = "CUDA not viable: ";
  msg += why;
  return Status(StatusCode::unavailable, std::move(msg));
}

std::string describe(Api& api) {
  if (!api.viability().ok()) return api.viability().message();
  std::string out = "CUDA viable: " + std::to_string(api.device_count()) + " device(s)";
  for (int d = 0; d < api.device_count(); ++d) {
    Result<DeviceCaps> caps = api.device_caps(d);
    out += "; device " + std::to_string(d) + ": ";
    if (!caps.ok()) {
      out += caps.status().message();
      continue;
    }
    out += "stream memory operations ";
    out += !caps->stream_mem_ops        ? "unsupported (event fallback)"
           : caps->lazy_module_loading ? "yes, but lazy module loading is on (event fallback; CUDA_MODULE_LOADING=EAGER)"
                                       : "yes";
    out += ", dma-buf ";
    out += caps->dma_buf ? "yes" : "no";
    out += ", GPUDirect RDMA ";
    out += caps->gpudirect_rdma ? "yes" : "no";
  }
  return out;
}

namespace {

// Every request answers the reason; plain pointers are host memory. Holds no CUDA state, so it
// is safe from any thread.
class UnavailableApi final : public Api {
 public:
  explicit UnavailableApi(Status reason) : reason_(std::move(reason)) {}

  const Status& viability() const override { return reason_; }
  int device_count() const override { return 0; }
  Result<DeviceCaps> device_caps(int) override { return reason_; }
  Status use_device(int) override { return reason_; }
  Result<PointerInfo> pointer_info(const void*) override { return PointerInfo{}; }
  Result<HostMapping> alloc_pinned(std::size_t, bool) override { return reason_; }
  Status free_pinned(void*) override { return reason_; }
  Result<Stream> create_stream() override { return reason_; }
  Status destroy_stream(Stream) override { return reason_; }
  Status wait_value32(Stream, DevicePtr, std::uint32_t, bool) override { return reason_; }
  Status memcpy_async(void*, const void*, std::size_t, Stream) override { return reason_; }
  Result<Event> create_event() override { return reason_; }
  Status destroy_event(Event) override { return reason_; }
  Status record_event(Event, Stream) override { return reason_; }
  Result<bool> event_fired(Event) override { return reason_; }
  Status stream_wait_event(Stream, Event) override { return reason_; }
  Result<int> dmabuf_fd(DevicePtr, std::size_t) override { return reason_; }

 private:
  Status reason_;
};

}  // namespace

std::unique_ptr<Api> make_unavailable_api(Status reason) {
  if (reason.ok()) reason = not_viable("no reason given (bug: make_unavailable_api called with ok)");
  return std::make_unique<UnavailableApi>(std::move(reason));
}

}  // namespace tictac::cuda
