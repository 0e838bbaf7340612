// GPUDirect RDMA helpers for the verbs backend: which path can register GPU memory with a NIC,
// and a dma-buf export of a device range.
//
// Paths, in order of preference: dma-buf (cuMemGetHandleForAddressRange with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD on a page-aligned range, then ibv_reg_dmabuf_mr), then
// nvidia-peermem (plain ibv_reg_mr on the device pointer; present when
// <sysfs>/kernel/mm/memory_peers/nv_mem/version or <sysfs>/module/nvidia_peermem exists).
// When neither works, GpuDirectSupport::reason says why (and detect_gpudirect logs it once at
// info level), so GPUDirect is never switched off silently.
//
// Contract: detect_gpudirect reads sysfs and queries device attributes: a set-up call, safe from
// any thread the Api allows. DmaBuf owns its file descriptor (closed on destruction; move-only).
// Errors: invalid_argument for a null or empty range, the Api's status (unavailable / cuda_error)
// otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/api.h"

namespace tictac::cuda {

struct GpuDirectSupport {
  bool dma_buf = false;
  bool peer_memory = false;
  std::string reason;  // empty when a path is available; otherwise why neither is
  bool available() const { return dma_buf || peer_memory; }
};

GpuDirectSupport detect_gpudirect(Api& api, int device, const std::string& sysfs_root = "/sys");

// A dma-buf for the host-page-aligned range that covers [ptr, ptr + bytes). Register it with
// ibv_reg_dmabuf_mr(pd, offset(), bytes, iova = ptr, fd(), access): `offset` is where `ptr`
// lies inside the exported range.
class DmaBuf {
 public:
  DmaBuf() = default;
  DmaBuf(int fd, std::uint64_t offset, std::uint64_t aligned_start, std::size_t aligned_bytes)
      : fd_(fd), offset_(offset), aligned_start_(aligned_start), aligned_bytes_(aligned_bytes) {}
  ~DmaBuf();
  DmaBuf(DmaBuf&& other) noexcept;
  DmaBuf& operator=(DmaBuf&& other) noexcept;
  DmaBuf(const DmaBuf&) = delete;
  DmaBuf& operator=(const DmaBuf&) = delete;

  int fd() const { return fd_; }
  std::uint64_t offset() const { return offset_; }
  std::uint64_t aligned_start() const { return aligned_start_; }
  std::size_t aligned_bytes() const { return aligned_bytes_; }

 private:
  int fd_ = -1;
  std::uint64_t offset_ = 0;
  std::uint64_t aligned_start_ = 0;
  std::size_t aligned_bytes_ = 0;
};

// page_bytes 0 means the host page size (sysconf). Must be a power of two.
Result<DmaBuf> export_dmabuf(Api& api, DevicePtr ptr, std::size_t bytes, std::size_t page_bytes = 0);

}  // namespace tictac::cuda
