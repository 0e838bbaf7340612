#include "transport/verbs/backend/gpu_registration.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/log.h"

namespace tictac::verbs {
namespace {

Status registration_error(std::string_view call, const std::string& what, std::size_t bytes,
                          int err) {
  std::string msg = "cannot register the " + what + " (" + std::to_string(bytes) +
                    " bytes of GPU memory) with the RDMA device: " + std::string(call) + ": " +
                    std::strerror(err);
  const std::string origin = std::string(call) + " errno=" + std::to_string(err);
  if (err == ENOMEM) {
    msg += "; the device ran out of registration resources: check the locked-memory limit "
           "(`ulimit -l`, RLIMIT_MEMLOCK) and the GPU's BAR1 space (`nvidia-smi -q -d MEMORY`)";
    return Status(StatusCode::resource_exhausted, msg, origin);
  }
  return Status(StatusCode::internal, msg, origin);
}

}  // namespace

std::string_view to_string(GpuPath path) {
  return path == GpuPath::dma_buf ? "dma-buf" : "nvidia-peermem";
}

GpuRegistrar::GpuRegistrar(const IbvApi& api, ibv_pd* pd, cuda::Api& cuda,
                           const cuda::GpuDirectSupport& support)
    : api_(api), pd_(pd), cuda_(cuda) {
  if (support.dma_buf && api.reg_dmabuf_mr != nullptr) {
    path_ = GpuPath::dma_buf;
  } else if (support.peer_memory) {
    path_ = GpuPath::peer_memory;
  } else if (support.dma_buf) {
    viability_ = Status(StatusCode::unavailable,
                        "GPUDirect not viable: libibverbs lacks ibv_reg_dmabuf_mr (rdma-core < 34) "
                        "and nvidia-peermem is not loaded; upgrade rdma-core or `modprobe "
                        "nvidia-peermem`; GPU buffers will be staged through host memory");
  } else {
    viability_ = Status(StatusCode::unavailable, "GPUDirect not viable: " + support.reason);
  }
  if (path_) {
    TICTAC_LOG(info) << "verbs: GPU memory registers through " << to_string(*path_);
  } else {
    TICTAC_LOG(info) << "verbs: " << viability_.message();
  }
}

Result<std::unique_ptr<const GpuRegistration>> GpuRegistrar::register_range(
    cuda::DevicePtr ptr, std::size_t bytes, int access, const std::string& what) {
  if (!path_) return viability_;
  if (ptr == 0 || bytes == 0) return invalid_argument("GPU registration of a null or empty range");
  errno = 0;
  if (*path_ == GpuPath::peer_memory) {
    ibv_mr* mr = api_.reg_mr(pd_, reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr)), bytes,
                             access);
    if (mr == nullptr) return registration_error("ibv_reg_mr", what, bytes, errno ? errno : EINVAL);
    return std::make_unique<const GpuRegistration>(api_, mr, access, GpuPath::peer_memory,
                                                   cuda::DmaBuf());
  }
  Result<cuda::DmaBuf> buf = cuda::export_dmabuf(cuda_, ptr, bytes);
  if (!buf.ok()) return buf.status().with_context("registering the " + what);
  errno = 0;
  ibv_mr* mr = api_.reg_dmabuf_mr(pd_, buf->offset(), bytes, ptr, buf->fd(), access);
  if (mr == nullptr) {
    return registration_error("ibv_reg_dmabuf_mr", what, bytes, errno ? errno : EINVAL);
  }  // the DmaBuf closes its fd on the way out
  return std::make_unique<const GpuRegistration>(api_, mr, access, GpuPath::dma_buf,
                                                 std::move(*buf));
}

}  // namespace tictac::verbs
