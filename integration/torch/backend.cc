#include "integration/torch/backend.h"

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <utility>

#include "integration/group/gate.h"
#include "integration/group/ring.h"
#include "integration/group/tags.h"
#include "integration/torch/store_adapter.h"
#include "integration/torch/tensors.h"

namespace tictac::torch_adapter {
namespace {

std::exception_ptr to_exception(const Status& s) {
  const std::string msg = "tictac: " + s.message();
  try {
    if (s.code() == StatusCode::connection_lost) C10_THROW_ERROR(DistNetworkError, msg);
    C10_THROW_ERROR(DistBackendError, msg);
  } catch (...) {
    return std::current_exception();
  }
}

const at::Tensor& single_tensor(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(tensors.size() == 1, "tictac ", op, ": expects exactly one tensor, got ",
              tensors.size());
  const at::Tensor& t = tensors[0];
  TORCH_CHECK(t.is_contiguous(), "tictac ", op,
              ": the tensor must be contiguous (call .contiguous() first)");
  TORCH_CHECK(!t.is_sparse(), "tictac ", op, ": sparse tensors are not supported");
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "tictac ", op,
              ": tensors must be on cpu or cuda, got ", t.device());
  return t;
}

std::string peer_text(int rank) { return rank < 0 ? "any rank" : "rank " + std::to_string(rank); }

// An event recorded on the caller's current stream of `t`'s device.
// (shared: c10::Event is move-only and tasks are std::functions)
std::shared_ptr<c10::Event> record_on_current_stream(const at::Tensor& t) {
  c10::impl::VirtualGuardImpl impl(t.device().type());
  auto ev = std::make_shared<c10::Event>(t.device().type());
  ev->record(impl.getStream(t.device()));
  return ev;
}

}  // namespace

// A Work completed exactly once, on the completion thread.
class TicTacWork : public c10d::Work {
 public:
  TicTacWork(int rank, c10d::OpType op, std::vector<at::Tensor> outputs,
             std::chrono::milliseconds default_timeout, std::string what)
      : c10d::Work(rank, op),
        outputs_(std::move(outputs)),
        default_timeout_(default_timeout),
        what_(std::move(what)) {
    std::vector<c10::Device> devices;
    for (const at::Tensor& t : outputs_) {
      if (!t.device().is_cpu() &&
          std::find(devices.begin(), devices.end(), t.device()) == devices.end()) {
        devices.push_back(t.device());
      }
    }
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()), devices);
  }

  int sourceRank() const override {
    std::lock_guard lock(mutex_);
    return source_rank_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::chrono::milliseconds getTimeout() const override { return default_timeout_; }

  bool wait(std::chrono::milliseconds timeout) override {
    const auto limit = timeout == kNoTimeout ? default_timeout_ : timeout;
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, limit, [&] { return completed_; })) {
      lock.unlock();
      if (cancel_) cancel_();
      C10_THROW_ERROR(DistBackendError, "tictac: " + what_ + " timed out after " +
                                            std::to_string(limit.count()) +
                                            " ms (the peer never sent/received it, or it is "
                                            "hung); the transfer was cancelled");
    }
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }

  void synchronize() override {}

  void set_cancel(std::function<void()> cancel) { cancel_ = std::move(cancel); }
  // Cancels the transfer(s) behind this work (no effect once complete).
  void cancel_transfer() {
    if (cancel_) cancel_();
  }

  // Completion thread only: fails the work with `e` (a coalesced batch passes on an op's error).
  void fail(std::exception_ptr e) {
    finish(e);
    future_->setError(e);
  }

  // Completion thread only.
  void complete(const Status& status, int source) {
    {
      std::lock_guard lock(mutex_);
      source_rank_ = source;
    }
    if (status.ok()) {
      finish();
      future_->markCompleted(c10::IValue(outputs_));
    } else {
      std::exception_ptr e = to_exception(status);
      finish(e);
      future_->setError(e);
    }
  }

 private:
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds default_timeout_;
  std::string what_;
  int source_rank_ = -1;  // guarded by mutex_
  std::function<void()> cancel_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

TicTacBackend::TicTacBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                             std::chrono::milliseconds timeout, const std::string& group_name)
    : c10d::Backend(rank, size), timeout_(timeout) {
  StoreAdapter adapter(store);
  group::GroupOptions options;
  options.rank = rank;
  options.size = size;
  options.timeout = timeout;
  options.key_prefix = group_name.empty() ? std::string("default/") : group_name + "/";
  Result<std::unique_ptr<group::Group>> created = group::Group::create(adapter, options);
  if (!created.ok()) {
    C10_THROW_ERROR(DistBackendError, "tictac: rank " + std::to_string(rank) + " of " +
                                          std::to_string(size) + " could not join the group: " +
                                          created.status().message());
  }
  group_ = std::move(*created);
  Result<int> concurrency = group::CollectiveScheduler::configured_concurrency();
  if (!concurrency.ok()) {
    group_.reset();
    C10_THROW_ERROR(DistBackendError, "tictac: " + concurrency.status().message());
  }
  collectives_ = std::make_unique<group::CollectiveScheduler>("tictac-coll", *concurrency);
  completions_ = std::make_unique<group::SerialExecutor>("tictac-done");
}

TicTacBackend::~TicTacBackend() { shutdown(); }

void TicTacBackend::shutdown() {
  if (!group_) return;
  collectives_->shutdown();
  group_->close();  // fails whatever is pending (cancelled); completions still run
  completions_->shutdown();
  group_.reset();
}

c10::intrusive_ptr<TicTacWork> TicTacBackend::make_work(c10d::OpType op,
                                                        std::vector<at::Tensor> outputs,
                                                        std::string what) {
  TORCH_CHECK(group_ != nullptr, "tictac: the process group was shut down");
  return c10::make_intrusive<TicTacWork>(rank_, op, std::move(outputs), timeout_, std::move(what));
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                   int tag) {
  const at::Tensor& t = single_tensor(tensors, "send");
  auto work = make_work(c10d::OpType::SEND, {t},
                        "send to rank " + std::to_string(dstRank) + " (tag " +
                            std::to_string(tag) + ", " + std::to_string(t.nbytes()) + " bytes)");
  note_coalesced(work);
  const std::int64_t priority = group_->priorities().lookup(tag);
  group::SerialExecutor* done_exec = completions_.get();
  auto finish = [work, done_exec](const Status& s, std::uint64_t, int src) {
    done_exec->post([work, s, src] { work->complete(s, src); });
  };
  if (t.device().is_cpu()) {
    const transport::RequestId id = group_->send(dstRank, group::user_tag(tag), t.data_ptr(),
                                                 t.nbytes(), priority, std::move(finish));
    group::Group* g = group_.get();
    work->set_cancel([g, id] { g->cancel(id); });
    return work;
  }
  // CUDA: the transport's cuda_path, ordered after the caller's current stream.
  std::shared_ptr<transport::MemoryRegion> region = device_region(t, "send");
  const transport::RequestId id =
      group_->send_region(dstRank, group::user_tag(tag), region, priority, std::move(finish));
  group::Group* g = group_.get();
  work->set_cancel([g, id] { g->cancel(id); });
  return work;
}

std::shared_ptr<transport::MemoryRegion> TicTacBackend::device_region(const at::Tensor& t,
                                                                      const char* op) {
  c10::impl::VirtualGuardImpl impl(t.device().type());
  const c10::Stream stream = impl.getStream(t.device());
  Result<std::shared_ptr<transport::MemoryRegion>> region =
      group_->register_device(t.data_ptr(), t.nbytes(), t.device().index(), stream.native_handle());
  if (!region.ok()) {
    C10_THROW_ERROR(DistBackendError,
                    std::string("tictac ") + op + " of a tensor on " + t.device().str() + ": " +
                        region.status().message() +
                        " (move the tensor to the CPU, or run where CUDA works)");
  }
  return std::move(region).value();
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::post_recv(std::vector<at::Tensor>& tensors, int src,
                                                        int tag) {
  const at::Tensor& t = single_tensor(tensors, "recv");
  auto work = make_work(src < 0 ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV, {t},
                        "recv from " + peer_text(src) + " (tag " + std::to_string(tag) + ", " +
                            std::to_string(t.nbytes()) + " bytes)");
  note_coalesced(work);
  group::SerialExecutor* done_exec = completions_.get();
  const std::size_t expected = t.nbytes();
  auto check_size = [expected](const Status& s, std::uint64_t n) {
    if (s.ok() && n != expected) {
      return Status(StatusCode::protocol_error,
                    "received " + std::to_string(n) + " bytes into a tensor of " +
                        std::to_string(expected) + " bytes; sender and receiver disagree on the "
                        "tensor's shape or dtype");
    }
    return s;
  };
  transport::RequestId id = 0;
  if (t.device().is_cpu()) {
    id = group_->recv(src, group::user_tag(tag), t.data_ptr(), t.nbytes(),
                      [work, done_exec, check_size](const Status& s, std::uint64_t n, int from) {
                        done_exec->post([work, s = check_size(s, n), from] { work->complete(s, from); });
                      });
  } else {
    // CUDA: the stream wait is on the caller's current stream when recv() returns.
    id = group_->recv_region(src, group::user_tag(tag), device_region(t, "recv"),
                             [work, done_exec, check_size](const Status& s, std::uint64_t n, int from) {
                               done_exec->post([work, s = check_size(s, n), from] { work->complete(s, from); });
                             });
  }
  group::Group* g = group_.get();
  work->set_cancel([g, id] { g->cancel(id); });
  return work;
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                   int tag) {
  return post_recv(tensors, srcRank, tag);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::recvAnysource(std::vector<at::Tensor>& tensors,
                                                            int tag) {
  return post_recv(tensors, group::kAnyRank, tag);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::collective(c10d::OpType op,
                                                         std::vector<at::Tensor> outputs,
                                                         std::string what, CollectiveBody body,
                                                         const std::vector<at::Tensor>& inputs,
                                                         bool body_waits_gates) {
  auto work = make_work(op, outputs, what);
  // The calling thread's `with tictac.torch.priority(p)`, else ahead of parameter transfers.
  const transport::Priority priority =
      group::PriorityTable::thread_priority().value_or(group::kCollectivePriority);
  // `with tictac.torch.after(gate)` on the calling thread: the collective keeps this ticket but
  // reads its input only once the gate opens (integration/group/gate.h).
  std::vector<std::shared_ptr<group::Gate>> gates = group::GateScope::current();
  // CUDA tensors: the collective thread waits for the caller's stream first.
  std::vector<std::shared_ptr<c10::Event>> ready;
  for (const std::vector<at::Tensor>* list : {&std::as_const(outputs), &inputs}) {
    for (const at::Tensor& t : *list) {
      if (t.device().is_cuda()) ready.push_back(record_on_current_stream(t));
    }
  }
  // With a priority override (and not a barrier, whose point is to wait for what came before),
  // the collective may run alongside other such ones; a tensor shared with one still running
  // makes it a fence, so two ops on one tensor never overlap.
  std::vector<const void*> storages;
  bool concurrent = false;
  if (group::PriorityTable::thread_priority().has_value() && op != c10d::OpType::BARRIER) {
    for (const std::vector<at::Tensor>* list : {&std::as_const(outputs), &inputs}) {
      for (const at::Tensor& t : *list) {
        if (t.defined() && t.has_storage()) storages.push_back(t.storage().data());
      }
    }
    concurrent = claim_storages(storages);
    if (!concurrent) storages.clear();
  }
  group::SerialExecutor* done_exec = completions_.get();
  group::Group* g = group_.get();
  const bool posted = collectives_->post(
      concurrent, priority,
      [this, g, work, body = std::move(body), ready, gates, done_exec, priority, storages, what,
       body_waits_gates](std::uint64_t ticket) mutable {
        for (const auto& ev : ready) ev->synchronize();
        group::PendingGates pending(gates, timeout_, what);
        Status s = body_waits_gates ? Status::Ok() : group::PendingGates::wait();
        try {
          group::Group::SeqScope scope(*g, ticket);
          if (s.ok()) s = body(priority);
          if (s.ok() && !group::PendingGates::waited()) {
            s = Status(StatusCode::internal, what + ": completed without waiting for its gates");
          }
        } catch (const std::exception& e) {
          s = Status(StatusCode::internal, e.what());
        }
        release_storages(storages);
        done_exec->post([work, s] { work->complete(s, -1); });
      });
  if (!posted) {
    release_storages(storages);
    done_exec->post([work] {
      work->complete(Status(StatusCode::cancelled, "the process group was shut down"), -1);
    });
  }
  return work;
}

bool TicTacBackend::claim_storages(const std::vector<const void*>& storages) {
  std::lock_guard lock(busy_mu_);
  for (const void* p : storages) {
    if (busy_storages_.count(p) > 0) return false;
  }
  for (const void* p : storages) ++busy_storages_[p];
  return true;
}

void TicTacBackend::release_storages(const std::vector<const void*>& storages) {
  if (storages.empty()) return;
  std::lock_guard lock(busy_mu_);
  for (const void* p : storages) {
    auto it = busy_storages_.find(p);
    if (it != busy_storages_.end() && --it->second == 0) busy_storages_.erase(it);
  }
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::barrier(const c10d::BarrierOptions&) {
  group::Group* g = group_.get();
  return collective(c10d::OpType::BARRIER, {}, "barrier",
                    [g](transport::Priority p) { return g->barrier(p); });
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                        const c10d::BroadcastOptions& opts) {
  check_same_dtype(tensors, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "tictac broadcast: rootTensor must be 0");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "tictac broadcast: root rank ",
              opts.rootRank, " is outside a group of ", size_);
  group::Group* g = group_.get();
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> ts = tensors;
  return collective(c10d::OpType::BROADCAST, tensors,
                    "broadcast from rank " + std::to_string(root),
                    [g, ts, root](transport::Priority p) mutable {
                      at::Tensor flat = flatten(ts);
                      Status s = g->broadcast(flat.data_ptr(), flat.nbytes(), root, p);
                      if (s.ok()) scatter_back(flat, ts);
                      return s;
                    });
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::AllreduceOptions& opts) {
  check_same_dtype(tensors, "allreduce");
  Reduction red = make_reduction(opts.reduceOp, tensors[0].scalar_type(), size_, "allreduce");
  group::Group* g = group_.get();
  std::vector<at::Tensor> ts = tensors;
  return collective(c10d::OpType::ALLREDUCE, tensors, "allreduce",
                    [g, ts, red](transport::Priority p) mutable {
                      at::Tensor flat = flatten(ts);
                      if (red.pre) red.pre(flat);
                      Status s = g->allreduce(flat.data_ptr(), static_cast<std::size_t>(flat.numel()),
                                              flat.element_size(), red.fn, p);
                      if (!s.ok()) return s;
                      if (red.post) red.post(flat);
                      scatter_back(flat, ts);
                      return s;
                    });
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return allreduce(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::allgather(
    std::vector<std::vector<at::Tensor>>& outputTensors, std::vector<at::Tensor>& inputTensors,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(inputTensors.size() == 1 && outputTensors.size() == 1,
              "tictac allgather: expects one input tensor and one output list");
  TORCH_CHECK(static_cast<int>(outputTensors[0].size()) == size_, "tictac allgather: the output "
              "list must hold one tensor per rank (", size_, "), got ", outputTensors[0].size());
  const at::Tensor in = inputTensors[0];
  for (const at::Tensor& o : outputTensors[0]) {
    TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                "tictac allgather: every output tensor must match the input's size and dtype");
  }
  group::Group* g = group_.get();
  std::vector<at::Tensor> outs = outputTensors[0];
  const int n = size_;
  return collective(c10d::OpType::ALLGATHER, outs, "allgather",
                    [g, in, outs, n](transport::Priority p) mutable {
    at::Tensor src = in.contiguous().to(at::kCPU);
    at::Tensor flat = at::empty({n * src.numel()}, src.options());
    Status s = g->allgather(src.data_ptr(), src.nbytes(), flat.data_ptr(), p);
    if (s.ok()) scatter_back(flat, outs);
    return s;
  }, {in});
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::_allgather_base(at::Tensor& outputBuffer,
                                                              at::Tensor& inputBuffer,
                                                              const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputBuffer.numel() == inputBuffer.numel() * size_ &&
                  outputBuffer.scalar_type() == inputBuffer.scalar_type(),
              "tictac _allgather_base: the output must hold world_size x the input (",
              size_, " x ", inputBuffer.numel(), " elements) of the same dtype");
  group::Group* g = group_.get();
  at::Tensor in = inputBuffer;
  std::vector<at::Tensor> outs{outputBuffer};
  return collective(
      c10d::OpType::_ALLGATHER_BASE, outs, "allgather_base",
      [g, in, outs](transport::Priority p) mutable {
        // A host tensor that is already contiguous is read only once the gates are open (the ring
        // receives from ready peers meanwhile); anything else is copied here, after the gates.
        if (!in.is_contiguous() || !in.device().is_cpu()) {
          Status ready = group::PendingGates::wait();
          if (!ready.ok()) return ready;
        }
        at::Tensor src = in.contiguous().to(at::kCPU);
        at::Tensor flat = flatten(outs);
        // A block of at least a ring chunk goes round the ring (one connection per rank's uplink,
        // pipelined by chunks): on the shaped 4-rank links of bench/e2e, ordered_ddp's 411 MB
        // all-gather took 1199-1221 ms this way against 1282-1396 ms with every rank sending its
        // block to every other at once (docs/ddp.md). Smaller ones go direct: one step, not n - 1.
        Status s;
        if (g->size() > 1 && src.nbytes() >= group::kRingChunkBytes) {
          const auto m = static_cast<std::size_t>(src.numel());
          auto* base = static_cast<std::byte*>(flat.data_ptr());
          std::byte* mine = base + static_cast<std::size_t>(g->rank()) * src.nbytes();
          const group::BeforeSend input_ready = [&] {
            Status ready = group::PendingGates::wait();
            if (ready.ok() && mine != src.data_ptr())
              std::memmove(mine, src.data_ptr(), src.nbytes());
            return ready;
          };
          s = group::ring_allgather(*g, base, group::Blocks::equal(m, g->size()),
                                    src.element_size(), p, "allgather_base", input_ready);
        } else {
          s = group::PendingGates::wait();
          if (s.ok()) s = g->allgather(src.data_ptr(), src.nbytes(), flat.data_ptr(), p);
        }
        if (s.ok()) scatter_back(flat, outs);
        return s;
      },
      {in}, /*body_waits_gates=*/true);
}

// ---------------------------------------------------------------------------------------------
// Coalescing: one transport batch per startCoalescing()/endCoalescing() pair on a thread.

namespace {

struct OpenCoalescing {
  const TicTacBackend* backend;
  std::vector<c10::intrusive_ptr<TicTacWork>> works;
};
// This thread's open batches, one per backend (a thread may coalesce on two groups at once).
thread_local std::vector<OpenCoalescing> t_coalescing;

std::vector<OpenCoalescing>::iterator find_coalescing(const TicTacBackend* backend) {
  return std::find_if(t_coalescing.begin(), t_coalescing.end(),
                      [backend](const OpenCoalescing& c) { return c.backend == backend; });
}

}  // namespace

void TicTacBackend::note_coalesced(const c10::intrusive_ptr<TicTacWork>& work) {
  auto it = find_coalescing(this);
  if (it != t_coalescing.end()) it->works.push_back(work);
}

void TicTacBackend::startCoalescing() {
  TORCH_CHECK(group_ != nullptr, "tictac: the process group was shut down");
  TORCH_CHECK(find_coalescing(this) == t_coalescing.end(),
              "tictac startCoalescing: this thread is already coalescing on this group (call "
              "endCoalescing first; batches do not nest)");
  t_coalescing.push_back(OpenCoalescing{this, {}});
  group_->begin_batch();
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::endCoalescing() {
  auto it = find_coalescing(this);
  TORCH_CHECK(it != t_coalescing.end(),
              "tictac endCoalescing: this thread has no open batch on this group (call "
              "startCoalescing first)");
  std::vector<c10::intrusive_ptr<TicTacWork>> works = std::move(it->works);
  t_coalescing.erase(it);
  std::vector<at::Tensor> outputs;
  for (const auto& w : works) {
    for (const at::Tensor& t : w->result()) outputs.push_back(t);
  }
  c10::intrusive_ptr<TicTacWork> all;
  try {
    all = make_work(c10d::OpType::COALESCED, outputs,
                    "coalesced batch of " + std::to_string(works.size()) + " p2p ops");
  } catch (...) {
    if (group_) group_->end_batch();
    throw;
  }
  all->set_cancel([works] {
    for (const auto& w : works) w->cancel_transfer();
  });
  // The join is attached before the batch is posted, so no op can complete unseen.
  struct Join {
    std::mutex mu;
    std::size_t left;
    std::exception_ptr first;
  };
  auto join = std::make_shared<Join>();
  join->left = works.size();
  group::SerialExecutor* done_exec = completions_.get();
  for (const auto& w : works) {
    w->getFuture()->addCallback([join, all, done_exec](c10::ivalue::Future& f) {
      std::exception_ptr last;
      {
        std::lock_guard lock(join->mu);
        if (f.hasError() && !join->first) join->first = f.exception_ptr();
        if (--join->left > 0) return;
        last = join->first;
      }
      done_exec->post([all, last] {
        if (last) {
          all->fail(last);
        } else {
          all->complete(Status::Ok(), -1);
        }
      });
    });
  }
  group_->end_batch();
  if (works.empty()) done_exec->post([all] { all->complete(Status::Ok(), -1); });
  return all;
}

}  // namespace tictac::torch_adapter
