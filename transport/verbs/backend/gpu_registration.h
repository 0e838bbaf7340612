// GpuRegistrar: registers CUDA device memory with a protection domain (GPUDirect RDMA).
//
// Path, chosen once at construction from cuda::detect_gpudirect's answer and the verbs table:
//   1. dma-buf: when the device supports dma-buf export and the table has reg_dmabuf_mr
//      (IBVERBS_1.12, rdma-core >= 34): cuda::export_dmabuf, then
//      reg_dmabuf_mr(pd, offset, bytes, iova = ptr, fd, access);
//   2. peer memory: when nvidia-peermem is loaded: reg_mr on the device pointer;
//   3. otherwise not viable: viability() is "GPUDirect not viable: <reason>" (detect's reason,
//      or that libibverbs lacks ibv_reg_dmabuf_mr and peer memory is absent), and
//      register_range returns that Status, so callers stage through host memory.
// The chosen path (or the refusal) is logged once at info level when the registrar is made.
//
// Contract: a GpuRegistration owns its MR and, on the dma-buf path, the dma-buf fd, which stays
// open until after the MR is deregistered. UNTESTED ON HARDWARE: only the fake fabric and the
// scripted CUDA table have run this (docs/backends.md "GPU memory").
// Errors: invalid_argument for an empty range; the export's Status; a failed registration is
// internal (resource_exhausted for ENOMEM) naming the call, the range and errno.
// Threading: like RegistrationCache, one thread at a time. Lifetime: the IbvApi, the PD and the
// cuda::Api must outlive the registrar and every registration it made.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "cuda/api.h"
#include "cuda/gpudirect.h"
#include "transport/verbs/backend/registration.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs {

enum class GpuPath { dma_buf, peer_memory };
std::string_view to_string(GpuPath path);

class GpuRegistration {
 public:
  GpuRegistration(const IbvApi& api, ibv_mr* mr, int access, GpuPath path, cuda::DmaBuf dmabuf)
      : dmabuf_(std::move(dmabuf)), mr_(api, mr, access), path_(path) {}
  const Registration& mr() const { return mr_; }
  GpuPath path() const { return path_; }
  int dmabuf_fd() const { return dmabuf_.fd(); }  // -1 on the peer-memory path

 private:
  cuda::DmaBuf dmabuf_;  // declared first: destroyed (fd closed) after mr_ is deregistered
  Registration mr_;
  GpuPath path_;
};

class GpuRegistrar {
 public:
  GpuRegistrar(const IbvApi& api, ibv_pd* pd, cuda::Api& cuda,
               const cuda::GpuDirectSupport& support);
  GpuRegistrar(const GpuRegistrar&) = delete;
  GpuRegistrar& operator=(const GpuRegistrar&) = delete;

  // Ok when a path exists, else the "GPUDirect not viable: ..." Status.
  const Status& viability() const { return viability_; }
  std::optional<GpuPath> path() const { return path_; }

  // Registers [ptr, ptr + bytes) of device memory; `what` names the buffer in errors.
  Result<std::unique_ptr<const GpuRegistration>> register_range(cuda::DevicePtr ptr,
                                                                std::size_t bytes, int access,
                                                                const std::string& what);

 private:
  const IbvApi& api_;
  ibv_pd* pd_;
  cuda::Api& cuda_;
  std::optional<GpuPath> path_;
  Status viability_;
};

}  // namespace tictac::verbs
