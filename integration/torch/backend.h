// TicTacBackend: the "tictac" c10d backend. A c10d::Backend over a tictac::group::Group: p2p
// sends leave in the priority the scheduler installed for their tag (or the calling thread's
// `with tictac.torch.priority(p)` override), collectives run on the group's collective threads
// (their sends ahead of parameter transfers unless the calling thread set an override), and every
// Work completes on a completion thread (never the transport's loop thread), so future
// callbacks may block.
// Tensors: CPU tensors move straight from/into their storage (contiguous only). CUDA tensors in
// send/recv go through the transport's cuda_path (Group::register_device) ordered by the
// caller's current stream: a send leaves after the work enqueued on it before send(); a recv
// makes it wait, so kernels enqueued after recv() see the data. Collectives on CUDA tensors wait
// for the caller's stream on the collective thread and reduce in host memory (docs/torch.md).
// Without a usable GPU a CUDA tensor raises DistBackendError "CUDA not viable: <reason>".
// Errors: a dead peer raises torch.distributed.DistNetworkError naming the rank; a timeout in
// Work.wait() cancels the transfer and raises DistBackendError naming op, peer and time.
// Collective threads (group::CollectiveScheduler): a collective posted with a priority override
// (not a barrier, no tensor storage shared with a running one) may run alongside others of the
// kind, up to TICTAC_COLL_CONCURRENCY (default 4) at once, so a later high-priority all-reduce
// overtakes a big low-priority one mid-ring; each such Work completes when its own collective
// does (completion order may differ from call order). Every other collective runs alone, in
// call order, after everything posted before it (the one-collective-thread semantics).
// Thread safety: like every c10d backend, ops may be called from any thread.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "integration/group/collective_scheduler.h"
#include "integration/group/group.h"
#include "integration/group/serial_executor.h"

namespace tictac::torch_adapter {

class TicTacWork;

class TicTacBackend : public c10d::Backend {
 public:
  TicTacBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                std::chrono::milliseconds timeout, const std::string& group_name);
  ~TicTacBackend() override;

  const std::string getBackendName() const override { return "tictac"; }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputTensors, std::vector<at::Tensor>& inputTensors,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& outputBuffer, at::Tensor& inputBuffer,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  // collectives.cc: the rest of c10d::Backend.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputTensors, std::vector<at::Tensor>& inputTensors,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputTensors, std::vector<std::vector<at::Tensor>>& inputTensors,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputTensors, std::vector<std::vector<at::Tensor>>& inputTensors,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& outputBuffer, at::Tensor& inputBuffer,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& outputBuffer, at::Tensor& inputBuffer, std::vector<int64_t>& outputSplitSizes,
      std::vector<int64_t>& inputSplitSizes,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputTensors, std::vector<at::Tensor>& inputTensors,
      const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputTensorLists,
      std::vector<at::Tensor>& inputTensors,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  void shutdown() override;

  // Coalescing (dist.batch_isend_irecv, torch's _coalescing_manager): the calling thread's p2p
  // ops between startCoalescing() and endCoalescing() reach the transport as one batch
  // (group::Group::begin_batch), so their sends leave in priority order from the first chunk
  // on. endCoalescing() returns one Work that completes when every op of the batch has (the
  // first error wins); each op's own Work stays valid too. CUDA sends are staged on the staging
  // thread, so they are posted after the batch (in their priority lane). One batch per thread
  // and group at a time (no nesting).
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // The scheduler's tag -> priority table (smaller = sent first).
  group::PriorityTable& priorities() { return group_->priorities(); }
  std::string address() const { return group_->address(); }
  // The transport backend ("tcp", "ucx", ...) of each rank's connection; "" for this rank.
  std::vector<std::string> peer_backends() const {
    std::vector<std::string> out;
    for (int r = 0; r < group_->size(); ++r) out.push_back(group_->backend_of(r));
    return out;
  }
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  c10::intrusive_ptr<TicTacWork> make_work(c10d::OpType op, std::vector<at::Tensor> outputs,
                                           std::string what);
  // Runs a blocking collective on the collective thread; `body` gets the priority its sends
  // leave with (the calling thread's override, else group::kCollectivePriority) and returns its
  // Status. CUDA `outputs` and `inputs` are waited for on the caller's current stream first.
  // The calling thread's gates (`tictac.torch.after`) are waited for before `body` runs, or,
  // with `body_waits_gates`, by the body itself before it reads its inputs
  // (group::PendingGates::wait(), which a ring calls once its first receives are posted).
  using CollectiveBody = std::function<Status(transport::Priority)>;
  c10::intrusive_ptr<c10d::Work> collective(c10d::OpType op, std::vector<at::Tensor> outputs,
                                            std::string what, CollectiveBody body,
                                            const std::vector<at::Tensor>& inputs = {},
                                            bool body_waits_gates = false);
  c10::intrusive_ptr<c10d::Work> post_recv(std::vector<at::Tensor>& tensors, int src, int tag);
  // A CUDA tensor registered with the group, ordered by its device's current stream; throws
  // DistBackendError naming the cause where CUDA cannot be used.
  std::shared_ptr<transport::MemoryRegion> device_region(const at::Tensor& t, const char* op);
  // Adds `work` to this thread's open coalescing batch on this backend, if there is one.
  void note_coalesced(const c10::intrusive_ptr<TicTacWork>& work);

  std::chrono::milliseconds timeout_;
  std::unique_ptr<group::Group> group_;
  // Storages of the tensors of posted, unfinished concurrent collectives (a collective touching
  // one of them runs as a fence instead, so ops on one tensor never overlap).
  bool claim_storages(const std::vector<const void*>& storages);
  void release_storages(const std::vector<const void*>& storages);

  std::unique_ptr<group::CollectiveScheduler> collectives_;
  std::mutex busy_mu_;
  std::unordered_map<const void*, int> busy_storages_;  // guarded by busy_mu_
  std::unique_ptr<group::SerialExecutor> completions_;
};

}  // namespace tictac::torch_adapter
