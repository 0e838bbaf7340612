// The real API table (built when the CUDA toolkit is found). Runtime calls go to the statically
// linked CUDA runtime; the driver calls the runtime does not wrap (stream memory operations,
// pointer attributes, dma-buf export, device attributes) are resolved once at run time with
// cudaGetDriverEntryPointByVersion at the CUDA 12.0 ABI, the first with the v2 stream memory
// operations. The runtime loads libcuda.so.1 itself; this binary never links -lcuda.
#include <dlfcn.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "common/log.h"
#include "cuda/runtime_api.h"

namespace tictac::cuda {
namespace {

constexpr unsigned int kDriverAbi = 12000;

std::string runtime_error_text(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + "=" + std::to_string(static_cast<int>(err)) + ": " +
         cudaGetErrorString(err);
}

Status runtime_failure(const char* call, cudaError_t err) {
  return Status(StatusCode::cuda_error, std::string(call) + " failed: " + runtime_error_text(err),
                std::string(call) + " err=" + std::to_string(static_cast<int>(err)));
}

// Driver entry points, resolved once by the probe. A null member means "not offered by this
// driver"; the probe decides which of them are required.
struct DriverTable {
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_attribute = nullptr;
  decltype(&::cuPointerGetAttributes) pointer_attributes = nullptr;
  decltype(&::cuStreamWaitValue32) wait_value32 = nullptr;
  decltype(&::cuMemGetHandleForAddressRange) range_handle = nullptr;
  decltype(&::cuModuleGetLoadingMode) loading_mode = nullptr;
};

template <typename Fn>
void resolve(const char* symbol, Fn* out) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t err = cudaGetDriverEntryPointByVersion(symbol, &fn, kDriverAbi, cudaEnableDefault, &found);
  if (err == cudaSuccess && found == cudaDriverEntryPointSuccess && fn != nullptr) {
    *out = reinterpret_cast<Fn>(fn);
  } else {
    TICTAC_LOG(debug) << "CUDA driver entry point " << symbol << " not available (query result "
                      << static_cast<int>(found) << ", " << runtime_error_text(err) << ")";
  }
}

// Why no driver answered: names the missing library when dlopen cannot find it.
std::string missing_driver_reason(cudaError_t count_err) {
  int driver_version = 0;
  (void)cudaDriverGetVersion(&driver_version);
  const std::string suffix = " (cudaGetDeviceCount: " + std::string(cudaGetErrorName(count_err)) + "=" +
                             std::to_string(static_cast<int>(count_err)) + ")";
  if (driver_version == 0) {
    void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      return "no driver: libcuda.so.1 not found (" + std::string(why ? why : "dlopen failed") +
             "); install the NVIDIA driver or run on a GPU machine" + suffix;
    }
    dlclose(handle);
    return "no driver: libcuda.so.1 loads but reports no driver version" + suffix;
  }
  return "driver too old: it supports CUDA " + std::to_string(driver_version / 1000) + "." +
         std::to_string(driver_version % 1000 / 10) + ", this build's runtime needs " +
         std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
         "; update the NVIDIA driver" + suffix;
}

class RuntimeApi final : public Api {
 public:
  RuntimeApi(int devices, DriverTable table) : devices_(devices), drv_(table) {}

  const Status& viability() const override { return ok_; }
  int device_count() const override { return devices_; }

  Result<DeviceCaps> device_caps(int device) override {
    TICTAC_RETURN_IF_ERROR(check_device(device));
    CUdevice dev = 0;
    TICTAC_RETURN_IF_ERROR(driver_call("cuDeviceGet", drv_.device_get(&dev, device)));
    DeviceCaps caps;
    // With the v2 stream memory operations (driver ABI >= 12.0) 32-bit waits are always
    // supported; the entry point resolving is the test.
    caps.stream_mem_ops = drv_.wait_value32 != nullptr;
    caps.can_flush_remote_writes = attribute(dev, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES);
    caps.dma_buf = drv_.range_handle != nullptr && attribute(dev, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
    caps.gpudirect_rdma = attribute(dev, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED);
    CUmoduleLoadingMode loading = CU_MODULE_EAGER_LOADING;
    caps.lazy_module_loading = drv_.loading_mode != nullptr && drv_.loading_mode(&loading) == CUDA_SUCCESS &&
                               loading == CU_MODULE_LAZY_LOADING;
    return caps;
  }

  Status use_device(int device) override {
    TICTAC_RETURN_IF_ERROR(check_device(device));
    return runtime_call("cudaSetDevice", cudaSetDevice(device));
  }

  Result<PointerInfo> pointer_info(const void* ptr) override {
    if (ptr == nullptr) return invalid_argument("pointer_info: null pointer");
    unsigned int memory_type = 0;
    unsigned int is_managed = 0;  // the driver writes a bool into the first byte
    int ordinal = -1;
    CUdeviceptr start = 0;
    size_t size = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void* data[] = {&memory_type, &is_managed, &ordinal, &start, &size};
    const CUresult res = drv_.pointer_attributes(5, attrs, data, reinterpret_cast<CUdeviceptr>(ptr));
    // Unlike cuPointerGetAttribute, this call succeeds with zeroed attributes for pointers CUDA
    // does not know; older drivers answer CUDA_ERROR_INVALID_VALUE. Both mean plain host memory.
    if (res == CUDA_ERROR_INVALID_VALUE || (res == CUDA_SUCCESS && memory_type == 0 && is_managed == 0)) {
      return PointerInfo{};
    }
    TICTAC_RETURN_IF_ERROR(driver_call("cuPointerGetAttributes", res));
    PointerInfo info;
    info.device = ordinal;
    info.range_start = start;
    info.range_size = size;
    if (is_managed != 0) {
      info.type = MemoryType::managed;
    } else if (memory_type == CU_MEMORYTYPE_DEVICE) {
      info.type = MemoryType::device;
    } else {
      info.type = MemoryType::pinned_host;
      info.device = -1;
    }
    return info;
  }

  Result<HostMapping> alloc_pinned(std::size_t bytes, bool mapped) override {
    if (bytes == 0) return invalid_argument("alloc_pinned: zero bytes");
    HostMapping m;
    m.bytes = bytes;
    const unsigned int flags = cudaHostAllocPortable | (mapped ? cudaHostAllocMapped : 0u);
    cudaError_t err = cudaHostAlloc(&m.host, bytes, flags);
    if (err != cudaSuccess) {
      return runtime_failure("cudaHostAlloc", err)
          .with_context("pinning " + std::to_string(bytes) + " bytes (check the locked-memory ulimit)");
    }
    if (mapped) {
      void* dev = nullptr;
      err = cudaHostGetDevicePointer(&dev, m.host, 0);
      if (err != cudaSuccess) {
        (void)cudaFreeHost(m.host);
        return runtime_failure("cudaHostGetDevicePointer", err);
      }
      m.device = reinterpret_cast<DevicePtr>(dev);
    }
    return m;
  }

  Status free_pinned(void* host) override { return runtime_call("cudaFreeHost", cudaFreeHost(host)); }

  Result<Stream> create_stream() override {
    cudaStream_t s = nullptr;
    TICTAC_RETURN_IF_ERROR(runtime_call("cudaStreamCreateWithFlags",
                                        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)));
    return static_cast<Stream>(s);
  }

  Status destroy_stream(Stream stream) override {
    return runtime_call("cudaStreamDestroy", cudaStreamDestroy(static_cast<cudaStream_t>(stream)));
  }

  Status wait_value32(Stream stream, DevicePtr addr, std::uint32_t value, bool flush) override {
    if (drv_.wait_value32 == nullptr) {
      return Status(StatusCode::unavailable,
                    "stream memory operations unsupported: the driver offers no cuStreamWaitValue32; "
                    "use the event fallback");
    }
    const unsigned int flags = static_cast<unsigned int>(CU_STREAM_WAIT_VALUE_GEQ) |
                              (flush ? static_cast<unsigned int>(CU_STREAM_WAIT_VALUE_FLUSH) : 0u);
    return driver_call("cuStreamWaitValue32",
                       drv_.wait_value32(static_cast<CUstream>(stream), addr, value, flags));
  }

  Status memcpy_async(void* dst, const void* src, std::size_t bytes, Stream stream) override {
    return runtime_call("cudaMemcpyAsync",
                        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
  }

  Result<Event> create_event() override {
    cudaEvent_t e = nullptr;
    TICTAC_RETURN_IF_ERROR(
        runtime_call("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&e, cudaEventDisableTiming)));
    return static_cast<Event>(e);
  }

  Status destroy_event(Event event) override {
    return runtime_call("cudaEventDestroy", cudaEventDestroy(static_cast<cudaEvent_t>(event)));
  }

  Status record_event(Event event, Stream stream) override {
    return runtime_call("cudaEventRecord",
                        cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  }

  Result<bool> event_fired(Event event) override {
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaSuccess) return true;
    if (err == cudaErrorNotReady) return false;
    return runtime_failure("cudaEventQuery", err);
  }

  Status stream_wait_event(Stream stream, Event event) override {
    return runtime_call("cudaStreamWaitEvent", cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                                                   static_cast<cudaEvent_t>(event), 0));
  }

  Result<int> dmabuf_fd(DevicePtr aligned_ptr, std::size_t aligned_bytes) override {
    if (drv_.range_handle == nullptr) {
      return Status(StatusCode::unavailable,
                    "dma-buf export unsupported: the driver offers no cuMemGetHandleForAddressRange");
    }
    int fd = -1;
    TICTAC_RETURN_IF_ERROR(driver_call(
        "cuMemGetHandleForAddressRange",
        drv_.range_handle(&fd, aligned_ptr, aligned_bytes, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
    return fd;
  }

 private:
  Status check_device(int device) const {
    if (device < 0 || device >= devices_) {
      return invalid_argument("CUDA device " + std::to_string(device) + " does not exist (" +
                              std::to_string(devices_) + " visible)");
    }
    return Status::Ok();
  }

  static Status runtime_call(const char* call, cudaError_t err) {
    return err == cudaSuccess ? Status::Ok() : runtime_failure(call, err);
  }

  Status driver_call(const char* call, CUresult res) const {
    if (res == CUDA_SUCCESS) return Status::Ok();
    const char* name = nullptr;
    if (drv_.get_error_name == nullptr || drv_.get_error_name(res, &name) != CUDA_SUCCESS || name == nullptr) {
      name = "CUDA_ERROR";
    }
    return Status(StatusCode::cuda_error,
                  std::string(call) + " failed: " + name + "=" + std::to_string(static_cast<int>(res)),
                  std::string(call) + " err=" + std::to_string(static_cast<int>(res)));
  }

  bool attribute(CUdevice dev, CUdevice_attribute attr) const {
    int value = 0;
    return drv_.device_attribute(&value, attr, dev) == CUDA_SUCCESS && value != 0;
  }

  const Status ok_;
  const int devices_;
  const DriverTable drv_;
};

}  // namespace

std::unique_ptr<Api> open_runtime_api() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorInsufficientDriver) return make_unavailable_api(not_viable(missing_driver_reason(err)));
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    return make_unavailable_api(not_viable(
        "no device: the driver found no CUDA device (" + runtime_error_text(cudaErrorNoDevice) +
        "); check nvidia-smi and CUDA_VISIBLE_DEVICES"));
  }
  if (err != cudaSuccess) {
    return make_unavailable_api(not_viable("cudaGetDeviceCount failed: " + runtime_error_text(err)));
  }
  DriverTable table;
  resolve("cuGetErrorName", &table.get_error_name);
  resolve("cuDeviceGet", &table.device_get);
  resolve("cuDeviceGetAttribute", &table.device_attribute);
  resolve("cuPointerGetAttributes", &table.pointer_attributes);
  resolve("cuStreamWaitValue32", &table.wait_value32);
  resolve("cuMemGetHandleForAddressRange", &table.range_handle);
  resolve("cuModuleGetLoadingMode", &table.loading_mode);
  if (table.device_get == nullptr || table.device_attribute == nullptr || table.pointer_attributes == nullptr) {
    return make_unavailable_api(not_viable(
        "the driver does not offer cuDeviceGet/cuDeviceGetAttribute/cuPointerGetAttributes at the CUDA 12.0 "
        "ABI; update the NVIDIA driver"));
  }
  auto api = std::make_unique<RuntimeApi>(count, table);
  TICTAC_LOG(debug) << describe(*api);
  return api;
}

std::string build_description() {
  return "CUDA toolkit " + std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
         " (runtime linked statically, driver loaded at run time)";
}

}  // namespace tictac::cuda
