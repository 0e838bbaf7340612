// TicTacBackend: the "tictac" c10d backend. A c10d::Backend over a tictac::group::Group: p2p
// sends leave in the priority the scheduler installed for their tag (or the calling thread's
// `with tictac.torch.priority(p)` override), collectives run on one collective thread, and every
// Work completes on a completion thread (never the transport's loop thread), so future
// callbacks may block.
// Tensors: CPU tensors move straight from/into their storage (contiguous only). CUDA tensors are
// staged through host memory on a staging thread after an event recorded on the caller's
// current stream, so stream order is kept (see docs/torch.md; not yet run on a GPU).
// Errors: a dead peer raises torch.distributed.DistNetworkError naming the rank; a timeout in
// Work.wait() cancels the transfer and raises DistBackendError naming op, peer and time.
// Thread safety: like every c10d backend, ops may be called from any thread.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>

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
  std::chrono::milliseconds timeout() const { return timeout_; }

 private:
  c10::intrusive_ptr<TicTacWork> make_work(c10d::OpType op, std::vector<at::Tensor> outputs,
                                           std::string what);
  // Runs a blocking collective on the collective thread; `body` returns its Status.
  c10::intrusive_ptr<c10d::Work> collective(c10d::OpType op, std::vector<at::Tensor> outputs,
                                            std::string what, std::function<Status()> body);
  c10::intrusive_ptr<c10d::Work> post_recv(std::vector<at::Tensor>& tensors, int src, int tag);
  // Adds `work` to this thread's open coalescing batch on this backend, if there is one.
  void note_coalesced(const c10::intrusive_ptr<TicTacWork>& work);

  std::chrono::milliseconds timeout_;
  std::unique_ptr<group::Group> group_;
  std::unique_ptr<group::SerialExecutor> collectives_;
  std::unique_ptr<group::SerialExecutor> completions_;
  std::unique_ptr<group::SerialExecutor> staging_;
};

}  // namespace tictac::torch_adapter
