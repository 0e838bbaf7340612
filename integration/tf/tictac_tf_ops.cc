// TicTac's TensorFlow op library, written only against TF's stable C kernel API
// (tensorflow/c/kernels.h, ops.h), so it is not tied to TF's C++ ABI. Every kernel is
// synchronous: TF 2.21's C async kernels crash when `done` runs after compute_async returns
// (docs/tf.md), so a waiting op blocks its inter-op thread until its transfers finish or the
// group timeout passes.
//
//   TictacInit(rank, size, store, timeout_ms, key_prefix)  attrs only; joins the process-wide
//       group (integration/group) over a FileStore ("file:DIR") or a TcpStore ("tcp:HOST:PORT";
//       rank 0 runs the store server on that port). Idempotent for the same arguments.
//   TictacShutdown()                                   closes the group (pending transfers fail).
//   TictacPull(tag, shape, dtype, src_rank) -> out     one blocking receive.
//   TictacPush(value, priority, tag, dst_rank)         one send; returns when it is sent.
//   TictacPullAll(tags, src_ranks, ranks, dims, T) -> (out: T, order: int64[n])
//       posts every receive at once, waits for all; `order` lists the indices in the order
//       they completed (the arrival order on the wire).
//   TictacPushAll(values: T, priorities: int64[n], tags, dst_ranks)
//       posts every send at once with its priority (smaller = first), then waits for all, so
//       the transport's per-priority queues decide the wire order.
// Failures (a dead peer, a timeout, a size mismatch) become TF errors naming the rank and tag.
// Tags are group::user_tag(int32) values. Also exported for ctypes: tictac_tf_shutdown(),
// tictac_tf_rank(), tictac_tf_size(). The streamed pulls (TictacPullStart/Wait, TictacStamp)
// are in pull_stream_ops.cc; the session and helpers in op_support.{h,cc}.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "integration/group/group.h"
#include "integration/group/tags.h"
#include "integration/tf/op_support.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

namespace {

using tictac::Status;
using tictac::StatusCode;
namespace group = tictac::group;
using namespace tictac::tf_ops;  // NOLINT(google-build-using-namespace): this TU's helpers

// ---- a batch of transfers, posted together and waited for together -------------------------

class Batch {
 public:
  explicit Batch(group::Group& g) : group_(g), state_(std::make_shared<State>()) {}

  void post(bool is_send, int peer, std::int32_t tag, void* data, std::size_t bytes,
            std::int64_t priority) {
    const int index = static_cast<int>(items_.size());
    items_.push_back({is_send, peer, tag});
    {
      std::lock_guard lock(state_->mu);
      ++state_->outstanding;
      state_->pending.push_back(index);
    }
    auto state = state_;
    const std::string what = describe(index) ;
    group::Done done = [state, index, is_send, bytes, what](const Status& s, std::uint64_t n, int) {
      std::lock_guard lock(state->mu);
      if (state->first.ok()) {
        if (!s.ok()) {
          state->first = Status(s.code(), what + " failed: " + s.message());
        } else if (!is_send && n != bytes) {
          state->first = Status(StatusCode::protocol_error,
                                what + ": received " + std::to_string(n) + " bytes, expected " +
                                    std::to_string(bytes) +
                                    " (sender and receiver disagree on shape or dtype)");
        }
      }
      if (s.ok()) state->order.push_back(index);
      state->pending.erase(std::find(state->pending.begin(), state->pending.end(), index));
      if (--state->outstanding == 0) state->cv.notify_all();
    };
    ids_.push_back(is_send ? group_.send(peer, group::user_tag(tag), data, bytes, priority,
                                         std::move(done))
                           : group_.recv(peer, group::user_tag(tag), data, bytes, std::move(done)));
  }

  // Waits for every transfer (at most the group timeout); on a timeout cancels the rest and
  // waits until the transport has let go of every buffer.
  Status wait(const char* op) {
    std::unique_lock lock(state_->mu);
    const auto deadline = std::chrono::steady_clock::now() + group_.timeout();
    if (state_->cv.wait_until(lock, deadline, [&] { return state_->outstanding == 0; })) {
      if (state_->first.ok()) return Status::Ok();
      return Status(state_->first.code(), std::string(op) + " on rank " +
                                              std::to_string(group_.rank()) + ": " +
                                              state_->first.message());
    }
    std::string waiting;
    std::vector<int> pending = state_->pending;
    std::sort(pending.begin(), pending.end());
    for (std::size_t i = 0; i < pending.size() && i < 8; ++i) {
      waiting += (i ? "; " : "") + describe(pending[i]);
    }
    if (pending.size() > 8) waiting += "; and " + std::to_string(pending.size() - 8) + " more";
    lock.unlock();
    for (auto id : ids_) group_.cancel(id);
    lock.lock();
    state_->cv.wait(lock, [&] { return state_->outstanding == 0; });
    return Status(StatusCode::timeout, std::string(op) + " on rank " +
                                           std::to_string(group_.rank()) + " timed out after " +
                                           std::to_string(group_.timeout().count()) +
                                           " ms waiting for: " + waiting +
                                           " (a dead or stuck peer?)");
  }

  std::vector<int> order() {
    std::lock_guard lock(state_->mu);
    return state_->order;
  }

 private:
  struct Item {
    bool is_send;
    int peer;
    std::int32_t tag;
  };
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    int outstanding = 0;
    std::vector<int> pending;
    std::vector<int> order;
    Status first;
  };
  std::string describe(int index) const {
    const Item& it = items_[static_cast<std::size_t>(index)];
    return std::string(it.is_send ? "send to rank " : "receive from rank ") +
           std::to_string(it.peer) + " (tag " + std::to_string(it.tag) + ")";
  }

  group::Group& group_;
  std::shared_ptr<State> state_;
  std::vector<Item> items_;
  std::vector<tictac::transport::RequestId> ids_;
};

// ---- TictacInit / TictacShutdown ------------------------------------------------------------

struct InitKernel {
  std::int64_t rank = 0, size = 1, timeout_ms = 30000;
  std::string store, prefix;
};

void* init_create(TF_OpKernelConstruction* ctx) {
  auto* k = new InitKernel;
  AttrReader a(ctx);
  k->rank = a.i64("rank");
  k->size = a.i64("size");
  k->timeout_ms = a.i64("timeout_ms");
  k->store = a.str("store");
  k->prefix = a.str("key_prefix");
  return k;
}

void init_compute(void* kp, TF_OpKernelContext* ctx) {
  auto* k = static_cast<InitKernel*>(kp);
  Status s = open_session(static_cast<int>(k->rank), static_cast<int>(k->size), k->store,
                          k->timeout_ms, k->prefix);
  if (!s.ok()) {
    fail(ctx, tf_code(s), "TictacInit(rank " + std::to_string(k->rank) + " of " +
                              std::to_string(k->size) + ", store " + k->store + "): " + s.to_string());
  }
}

void shutdown_compute(void*, TF_OpKernelContext*) { close_session(); }
void* empty_create(TF_OpKernelConstruction*) { return nullptr; }
void empty_delete(void*) {}

// ---- pulls and pushes ----------------------------------------------------------------------

using Transfer = TensorSpec;

struct PullKernel {
  std::vector<Transfer> items;
  bool all = false;
};

void* pull_create(TF_OpKernelConstruction* ctx, bool all) {
  auto* k = new PullKernel;
  k->all = all;
  AttrReader a(ctx);
  if (!all) {
    Transfer t;
    t.tag = a.i64("tag");
    t.peer = a.i64("src_rank");
    t.dtype = a.type("dtype");
    t.dims = a.i64s("shape");
    k->items.push_back(t);
    return k;
  }
  read_tensor_specs(ctx, a, "TictacPullAll", k->items);
  return k;
}

void* pull_one_create(TF_OpKernelConstruction* ctx) { return pull_create(ctx, false); }
void* pull_all_create(TF_OpKernelConstruction* ctx) { return pull_create(ctx, true); }
void pull_delete(void* k) { delete static_cast<PullKernel*>(k); }

void pull_compute(void* kp, TF_OpKernelContext* ctx) {
  auto* k = static_cast<PullKernel*>(kp);
  const char* op = k->all ? "TictacPullAll" : "TictacPull";
  group::Group* g = require_group(ctx, op);
  if (g == nullptr) return;
  TF_Status* st = TF_NewStatus();
  std::vector<TF_Tensor*> outs;
  Batch batch(*g);
  bool ok = true;
  // One transport batch, as for the pushes: the loop sees every receive before any READY or
  // ADVERT leaves, so the sender gets them together and orders the data by priority (posted one
  // by one under load, the first receive's READY let its message start alone: seen in CI as the
  // first-declared weight arriving first at step 0 under TIC).
  g->begin_batch();
  for (std::size_t i = 0; i < k->items.size() && ok; ++i) {
    const Transfer& t = k->items[i];
    std::int64_t elems = 1;
    for (std::int64_t d : t.dims) elems *= d;
    const std::size_t bytes = static_cast<std::size_t>(elems) * TF_DataTypeSize(t.dtype);
    if (TF_DataTypeSize(t.dtype) == 0) {
      fail(ctx, TF_INVALID_ARGUMENT, std::string(op) + ": dtype of tag " + std::to_string(t.tag) +
                                         " has no fixed size (strings and resources cannot be pulled)");
      ok = false;
      break;
    }
    TF_Tensor* out = TF_AllocateOutput(ctx, static_cast<int>(i), t.dtype, t.dims.data(),
                                       static_cast<int>(t.dims.size()), bytes, st);
    if (TF_GetCode(st) != TF_OK) {
      TF_OpKernelContext_Failure(ctx, st);
      ok = false;
      break;
    }
    outs.push_back(out);
    batch.post(false, static_cast<int>(t.peer), static_cast<std::int32_t>(t.tag),
               TF_TensorData(out), bytes, 0);
  }
  g->end_batch();  // before waiting: the batch reaches the loop here
  if (ok) {
    Status s = batch.wait(op);
    if (!s.ok()) {
      fail(ctx, tf_code(s), s.message());
      ok = false;
    }
  } else {
    (void)batch.wait(op);  // let the transport release what was posted
  }
  if (ok && k->all) {
    std::vector<int> order = batch.order();
    std::int64_t n = static_cast<std::int64_t>(order.size());
    TF_Tensor* ord = TF_AllocateOutput(ctx, static_cast<int>(k->items.size()), TF_INT64, &n, 1,
                                       sizeof(std::int64_t) * order.size(), st);
    if (TF_GetCode(st) != TF_OK) {
      TF_OpKernelContext_Failure(ctx, st);
    } else {
      auto* p = static_cast<std::int64_t*>(TF_TensorData(ord));
      for (std::size_t i = 0; i < order.size(); ++i) p[i] = order[i];
      TF_DeleteTensor(ord);
    }
  }
  for (TF_Tensor* t : outs) TF_DeleteTensor(t);
  TF_DeleteStatus(st);
}

struct PushKernel {
  std::vector<std::int64_t> tags, dsts;
  bool all = false;
};

void* push_create(TF_OpKernelConstruction* ctx, bool all) {
  auto* k = new PushKernel;
  k->all = all;
  AttrReader a(ctx);
  if (!all) {
    k->tags = {a.i64("tag")};
    k->dsts = {a.i64("dst_rank")};
    return k;
  }
  k->tags = a.i64s("tags");
  k->dsts = a.i64s("dst_ranks");
  auto types = a.types("T");
  if (a.ok() && (k->tags.size() != types.size() || k->dsts.size() != types.size())) {
    construction_failure(ctx, "TictacPushAll: tags and dst_ranks must have one entry per value");
  }
  return k;
}

void* push_one_create(TF_OpKernelConstruction* ctx) { return push_create(ctx, false); }
void* push_all_create(TF_OpKernelConstruction* ctx) { return push_create(ctx, true); }
void push_delete(void* k) { delete static_cast<PushKernel*>(k); }

void push_compute(void* kp, TF_OpKernelContext* ctx) {
  auto* k = static_cast<PushKernel*>(kp);
  const char* op = k->all ? "TictacPushAll" : "TictacPush";
  group::Group* g = require_group(ctx, op);
  if (g == nullptr) return;
  const int n = static_cast<int>(k->tags.size());
  TF_Status* st = TF_NewStatus();
  // The priorities are the last input: int64[n] (one scalar for TictacPush).
  TF_Tensor* prio = priorities_input(ctx, n, n, op);
  if (prio == nullptr) {
    TF_DeleteStatus(st);
    return;
  }
  const auto* p = static_cast<const std::int64_t*>(TF_TensorData(prio));
  std::vector<TF_Tensor*> ins;
  Batch batch(*g);
  bool ok = true;
  // One transport batch: the loop sees every send before the first chunk leaves, so the
  // SendQueue orders them all by priority (posted one by one, the first one posted could start
  // before a higher-priority one arrived; seen in CI as declaration order at step 0).
  g->begin_batch();
  for (int i = 0; i < n; ++i) {
    TF_Tensor* in = nullptr;
    TF_GetInput(ctx, i, &in, st);
    if (TF_GetCode(st) != TF_OK) {
      TF_OpKernelContext_Failure(ctx, st);
      ok = false;
      break;
    }
    ins.push_back(in);
    if (TF_DataTypeSize(TF_TensorType(in)) == 0) {
      fail(ctx, TF_INVALID_ARGUMENT, std::string(op) + ": value " + std::to_string(i) +
                                         " has a dtype without fixed size");
      ok = false;
      break;
    }
    batch.post(true, static_cast<int>(k->dsts[static_cast<std::size_t>(i)]),
               static_cast<std::int32_t>(k->tags[static_cast<std::size_t>(i)]), TF_TensorData(in),
               TF_TensorByteSize(in), p[i]);
  }
  g->end_batch();  // before waiting: the batch reaches the loop here
  Status s = batch.wait(op);
  if (ok && !s.ok()) fail(ctx, tf_code(s), s.message());
  for (TF_Tensor* t : ins) TF_DeleteTensor(t);
  TF_DeleteTensor(prio);
  TF_DeleteStatus(st);
}

// ---- registration ---------------------------------------------------------------------------

void init_delete(void* k) { delete static_cast<InitKernel*>(k); }

struct Registrar {
  Registrar() {
    register_op("TictacInit", {}, {},
                {"rank: int >= 0", "size: int >= 1", "store: string", "timeout_ms: int = 30000",
                 "key_prefix: string = 'tf/'"},
                &init_create, &init_compute, &init_delete, true);
    register_op("TictacShutdown", {}, {}, {}, &empty_create, &shutdown_compute, &empty_delete, true);
    register_op("TictacPull", {}, {"out: dtype"},
                {"tag: int >= 0", "shape: list(int) >= 0", "dtype: type", "src_rank: int >= 0"},
                &pull_one_create, &pull_compute, &pull_delete, true);
    register_op("TictacPullAll", {}, {"out: T", "order: int64"},
                {"tags: list(int) >= 0", "src_ranks: list(int) >= 0", "ranks: list(int) >= 0",
                 "dims: list(int) >= 0", "T: list(type) >= 0"},
                &pull_all_create, &pull_compute, &pull_delete, true);
    register_op("TictacPush", {"value: dtype", "priority: int64"}, {},
                {"tag: int >= 0", "dst_rank: int >= 0", "dtype: type"},
                &push_one_create, &push_compute, &push_delete, true);
    register_op("TictacPushAll", {"values: T", "priorities: int64"}, {},
                {"tags: list(int) >= 0", "dst_ranks: list(int) >= 0", "T: list(type) >= 0"},
                &push_all_create, &push_compute, &push_delete, true);
  }
} registrar;

}  // namespace

extern "C" {
__attribute__((visibility("default"))) void tictac_tf_shutdown() { tictac::tf_ops::close_session(); }
__attribute__((visibility("default"))) int tictac_tf_rank() {
  tictac::group::Group* g = tictac::tf_ops::current_group();
  return g != nullptr ? g->rank() : -1;
}
__attribute__((visibility("default"))) int tictac_tf_size() {
  tictac::group::Group* g = tictac::tf_ops::current_group();
  return g != nullptr ? g->size() : 0;
}
}
