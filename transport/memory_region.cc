#include "transport/memory_region.h"

#include <string>
#include <utility>

namespace tictac::transport {

Result<MemoryRegion> MemoryRegion::register_buffer(const BufferDesc& desc) {
  if (desc.type == MemoryType::cuda) {
    return invalid_argument(
        "cannot register CUDA memory (device " + std::to_string(desc.cuda_device) +
        "): this build's transport handles host memory only; the cuda layer that makes device "
        "buffers transferable is not built. Copy the tensor to host memory first");
  }
  if (desc.data == nullptr && desc.bytes != 0) {
    return invalid_argument("cannot register a null buffer of " + std::to_string(desc.bytes) +
                            " bytes");
  }
  return MemoryRegion(desc);
}

Result<MemoryRegion> MemoryRegion::host(void* data, std::size_t bytes) {
  BufferDesc d;
  d.data = data;
  d.bytes = bytes;
  return register_buffer(d);
}

MemoryRegion::MemoryRegion(MemoryRegion&& other) noexcept : desc_(std::exchange(other.desc_, {})) {}

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& other) noexcept {
  desc_ = std::exchange(other.desc_, {});
  return *this;
}

Status MemoryRegion::check_range(std::uint64_t offset, std::uint64_t length) const {
  if (offset > desc_.bytes || length > desc_.bytes - offset) {
    return invalid_argument("range [" + std::to_string(offset) + ", " + std::to_string(offset) +
                            "+" + std::to_string(length) + ") lies outside the region of " +
                            std::to_string(desc_.bytes) + " bytes");
  }
  return Status::Ok();
}

}  // namespace tictac::transport
