#include "transport/memory_region.h"

#include <string>
#include <utility>

#include "cuda/device_buffer.h"

namespace tictac::transport {

Result<MemoryRegion> MemoryRegion::register_buffer(const BufferDesc& desc) {
  if (desc.type == MemoryType::cuda) {
    return invalid_argument("cannot register CUDA memory (device " + std::to_string(desc.cuda_device) +
                            ") without a CUDA table: register it with Context::register_buffer, which "
                            "checks it against the driver");
  }
  if (desc.data == nullptr && desc.bytes != 0) {
    return invalid_argument("cannot register a null buffer of " + std::to_string(desc.bytes) +
                            " bytes");
  }
  return MemoryRegion(desc);
}

Result<MemoryRegion> MemoryRegion::register_device(const BufferDesc& desc, cuda::Api& api) {
  if (desc.type != MemoryType::cuda) {
    return invalid_argument("register_device was given a host buffer; use register_buffer");
  }
  TICTAC_RETURN_IF_ERROR(api.viability());  // "CUDA not viable: <reason>"
  Result<cuda::DeviceBuffer> buf = cuda::describe_buffer(api, desc.data, desc.bytes, desc.cuda_stream);
  if (!buf.ok()) return buf.status().with_context("registering a CUDA buffer");
  if (desc.bytes != 0 && !buf->on_device()) {
    return invalid_argument("registering a CUDA buffer: the driver reports " + buf->describe() +
                            "; register host memory (pinned or not) with MemoryType::host");
  }
  BufferDesc d = desc;
  if (desc.bytes != 0) {
    if (desc.cuda_device >= 0 && buf->device >= 0 && desc.cuda_device != buf->device) {
      return invalid_argument("registering a CUDA buffer for device " + std::to_string(desc.cuda_device) +
                              ": the driver reports " + buf->describe());
    }
    if (buf->device >= 0) d.cuda_device = buf->device;
  }
  if (d.cuda_device < 0) d.cuda_device = 0;  // managed or empty: the stream's device is not known
  return MemoryRegion(d);
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
