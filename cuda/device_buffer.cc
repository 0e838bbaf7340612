#include "cuda/device_buffer.h"

#include <cstdint>
#include <cstdio>

namespace tictac::cuda {

std::string DeviceBuffer::describe() const {
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", ptr);
  std::string out(to_string(type));
  if (device >= 0) out += " (device " + std::to_string(device) + ")";
  out += " buffer of " + std::to_string(size) + " bytes at " + addr;
  return out;
}

Result<DeviceBuffer> describe_buffer(Api& api, void* ptr, std::size_t size, Stream stream) {
  if (ptr == nullptr) {
    if (size != 0) return invalid_argument("buffer of " + std::to_string(size) + " bytes has a null address");
    if (stream != nullptr) TICTAC_RETURN_IF_ERROR(api.viability());
    return DeviceBuffer{nullptr, 0, MemoryType::host, -1, stream};
  }
  if (stream != nullptr && !api.viability().ok()) {
    return api.viability().with_context("a CUDA stream was given with the buffer");
  }
  Result<PointerInfo> info = api.pointer_info(ptr);
  if (!info.ok()) return info.status();
  DeviceBuffer buf{ptr, size, info->type, info->device, stream};
  if (info->range_size != 0) {
    const auto begin = reinterpret_cast<std::uintptr_t>(ptr);
    const std::uint64_t end_of_alloc = info->range_start + info->range_size;
    if (begin < info->range_start || size > end_of_alloc - begin) {
      char alloc[32];
      std::snprintf(alloc, sizeof alloc, "0x%llx", static_cast<unsigned long long>(info->range_start));
      return invalid_argument(buf.describe() + " runs past the end of its CUDA allocation (" +
                              std::to_string(info->range_size) + " bytes at " + alloc + ")");
    }
  }
  return buf;
}

}  // namespace tictac::cuda
