#include "cuda/gpudirect.h"

#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "common/log.h"

namespace tictac::cuda {
namespace {

bool path_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

GpuDirectSupport detect_gpudirect(Api& api, int device, const std::string& sysfs_root) {
  GpuDirectSupport out;
  if (!api.viability().ok()) {
    out.reason = "GPUDirect RDMA off: " + api.viability().message();
    TICTAC_LOG(info) << out.reason;
    return out;
  }
  std::string dma_buf_why;
  Result<DeviceCaps> caps = api.device_caps(device);
  if (!caps.ok()) {
    dma_buf_why = caps.status().message();
  } else if (!caps->dma_buf) {
    dma_buf_why = "device " + std::to_string(device) + " or its driver does not support dma-buf export";
  } else {
    out.dma_buf = true;
  }
  const std::string nv_mem = sysfs_root + "/kernel/mm/memory_peers/nv_mem/version";
  const std::string peermem = sysfs_root + "/module/nvidia_peermem";
  out.peer_memory = path_exists(nv_mem) || path_exists(peermem);
  if (!out.available()) {
    out.reason = "GPUDirect RDMA off: dma-buf unavailable (" + dma_buf_why + ") and nvidia-peermem not loaded (no " +
                 nv_mem + ", no " + peermem + "; try `modprobe nvidia-peermem`); GPU buffers will be staged through host memory";
    TICTAC_LOG(info) << out.reason;
  } else {
    TICTAC_LOG(info) << "GPUDirect RDMA on device " << device << ": " << (out.dma_buf ? "dma-buf" : "")
                     << (out.dma_buf && out.peer_memory ? ", " : "") << (out.peer_memory ? "nvidia-peermem" : "");
  }
  return out;
}

DmaBuf::~DmaBuf() {
  if (fd_ >= 0) ::close(fd_);
}

DmaBuf::DmaBuf(DmaBuf&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      offset_(other.offset_),
      aligned_start_(other.aligned_start_),
      aligned_bytes_(other.aligned_bytes_) {}

DmaBuf& DmaBuf::operator=(DmaBuf&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    offset_ = other.offset_;
    aligned_start_ = other.aligned_start_;
    aligned_bytes_ = other.aligned_bytes_;
  }
  return *this;
}

Result<DmaBuf> export_dmabuf(Api& api, DevicePtr ptr, std::size_t bytes, std::size_t page_bytes) {
  if (ptr == 0 || bytes == 0) return invalid_argument("dma-buf export of a null or empty device range");
  if (page_bytes == 0) page_bytes = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  if ((page_bytes & (page_bytes - 1)) != 0) {
    return invalid_argument("page size " + std::to_string(page_bytes) + " is not a power of two");
  }
  const std::uint64_t mask = page_bytes - 1;
  if (ptr + bytes < ptr || ptr + bytes + mask < ptr + bytes) {
    return invalid_argument("dma-buf export range wraps the address space");
  }
  const std::uint64_t start = ptr & ~mask;
  const std::uint64_t end = (ptr + bytes + mask) & ~mask;
  Result<int> fd = api.dmabuf_fd(start, static_cast<std::size_t>(end - start));
  if (!fd.ok()) return fd.status().with_context("exporting a dma-buf for GPUDirect RDMA");
  return DmaBuf(*fd, ptr - start, start, static_cast<std::size_t>(end - start));
}

}  // namespace tictac::cuda
