// Streamed pulls: receives posted at the start of a step and handed over one by one, so that a
// tf.function can gate each parameter read on its own transfer (compute/communication overlap).
// C kernel API only, synchronous kernels (docs/tf.md: the C async kernel cannot complete late).
//
//   TictacPullStart(priorities: int64[n]; tags, src_ranks, ranks, dims, T)   stateful
//       posts one receive per tag into a tensor it allocates (TF_AllocateTensor), in priority
//       order (smaller first; ties by index) and returns at once. INVALID_ARGUMENT when a tag is
//       given twice or is still started (not yet waited for) in this session.
//   TictacPullWait(tag, dtype) -> (out: dtype, arrived_s: float64)           stateful
//       blocks until the tag's receive has landed and hands its tensor over without a copy
//       (TF_SetOutput), with the wall-clock time (seconds since the epoch) at which it landed.
//       FAILED_PRECONDITION when the tag was not started; on the group timeout cancels the
//       receive and fails with DEADLINE_EXCEEDED; a failed receive fails with its cause.
//   TictacStamp(x: T) -> (y: T, time_s: float64)                             not stateful
//       y is x (no copy); time_s is the wall-clock time at which x was ready. A probe for when
//       a layer was computed; its gradient is the identity (registered in tictac.tf). Not
//       stateful, so that automatic control dependencies do not order it after every wait.
// The started receives live in a process-wide table keyed by tag; entries from an earlier
// session (before TictacShutdown) are discarded, never waited for.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

#include "integration/group/group.h"
#include "integration/group/tags.h"
#include "integration/tf/op_support.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"
#include "tensorflow/c/tf_tensor.h"

namespace {

using tictac::Status;
using tictac::StatusCode;
namespace group = tictac::group;
using namespace tictac::tf_ops;  // NOLINT(google-build-using-namespace): this TU's helpers

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One started receive. Shared by the table and the transport's completion callback, so the
// tensor outlives the transport's use of its buffer.
struct Slot {
  ~Slot() {
    if (tensor != nullptr) TF_DeleteTensor(tensor);
  }
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  double arrived_s = 0;
  TF_Tensor* tensor = nullptr;
  TF_DataType dtype = TF_FLOAT;
  int peer = 0;
  std::int64_t tag = 0;
  std::uint64_t generation = 0;
  tictac::transport::RequestId id{};
};

std::mutex g_table_mu;
std::map<std::int64_t, std::shared_ptr<Slot>> g_table;  // started, not yet waited for

std::string describe(const Slot& s) {
  return "receive from rank " + std::to_string(s.peer) + " (tag " + std::to_string(s.tag) + ")";
}

// ---- TictacPullStart ------------------------------------------------------------------------

using Item = TensorSpec;

struct StartKernel {
  std::vector<Item> items;
};

void* start_create(TF_OpKernelConstruction* ctx) {
  auto* k = new StartKernel;
  AttrReader a(ctx);
  if (!read_tensor_specs(ctx, a, "TictacPullStart", k->items)) return k;
  for (const Item& it : k->items) {
    if (TF_DataTypeSize(it.dtype) == 0) {
      construction_failure(ctx, "TictacPullStart: the dtype of tag " + std::to_string(it.tag) +
                                    " has no fixed size (strings and resources cannot be pulled)");
      return k;
    }
  }
  return k;
}

void start_delete(void* k) { delete static_cast<StartKernel*>(k); }

// Checks that no tag repeats and none is started in this session; drops stale entries.
// Caller holds g_table_mu.
Status check_tags(const std::vector<Item>& items, std::uint64_t generation) {
  std::vector<std::int64_t> seen;
  for (const Item& it : items) {
    if (std::find(seen.begin(), seen.end(), it.tag) != seen.end()) {
      return Status(StatusCode::invalid_argument,
                    "TictacPullStart: tag " + std::to_string(it.tag) + " is given twice");
    }
    seen.push_back(it.tag);
    auto found = g_table.find(it.tag);
    if (found == g_table.end()) continue;
    if (found->second->generation != generation) {
      g_table.erase(found);  // left over from an earlier session: its receive has failed
      continue;
    }
    return Status(StatusCode::invalid_argument,
                  "TictacPullStart: tag " + std::to_string(it.tag) +
                      " is already started and not yet waited for (call TictacPullWait / "
                      "tictac.tf.pull_wait for it before starting it again)");
  }
  return Status::Ok();
}

void start_compute(void* kp, TF_OpKernelContext* ctx) {
  auto* k = static_cast<StartKernel*>(kp);
  group::Group* g = require_group(ctx, "TictacPullStart");
  if (g == nullptr) return;
  const std::uint64_t generation = session_generation();
  const std::size_t n = k->items.size();
  TF_Status* st = TF_NewStatus();
  TF_Tensor* prio = priorities_input(ctx, 0, static_cast<std::int64_t>(n), "TictacPullStart");
  if (prio == nullptr) {
    TF_DeleteStatus(st);
    return;
  }
  const auto* p = static_cast<const std::int64_t*>(TF_TensorData(prio));
  std::vector<std::size_t> post_order(n);
  std::iota(post_order.begin(), post_order.end(), std::size_t{0});
  std::stable_sort(post_order.begin(), post_order.end(),
                   [p](std::size_t a, std::size_t b) { return p[a] < p[b]; });
  TF_DeleteTensor(prio);

  std::lock_guard lock(g_table_mu);
  Status s = check_tags(k->items, generation);
  if (!s.ok()) {
    fail(ctx, tf_code(s), s.message());
    TF_DeleteStatus(st);
    return;
  }
  std::vector<std::shared_ptr<Slot>> slots(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Item& it = k->items[i];
    std::int64_t elems = 1;
    for (std::int64_t d : it.dims) elems *= d;
    const std::size_t bytes = static_cast<std::size_t>(elems) * TF_DataTypeSize(it.dtype);
    auto slot = std::make_shared<Slot>();
    slot->tensor = TF_AllocateTensor(it.dtype, it.dims.data(), static_cast<int>(it.dims.size()), bytes);
    if (slot->tensor == nullptr) {
      fail(ctx, TF_RESOURCE_EXHAUSTED, "TictacPullStart: cannot allocate " + std::to_string(bytes) +
                                           " bytes for tag " + std::to_string(it.tag));
      TF_DeleteStatus(st);
      return;
    }
    slot->dtype = it.dtype;
    slot->peer = static_cast<int>(it.peer);
    slot->tag = it.tag;
    slot->generation = generation;
    slots[i] = std::move(slot);
  }
  for (std::size_t i : post_order) {
    std::shared_ptr<Slot> slot = slots[i];
    const std::size_t bytes = TF_TensorByteSize(slot->tensor);
    const std::string what = describe(*slot);
    group::Done done = [slot, bytes, what](const Status& r, std::uint64_t got, int) {
      std::lock_guard sl(slot->mu);
      if (!r.ok()) {
        slot->status = Status(r.code(), what + " failed: " + r.message());
      } else if (got != bytes) {
        slot->status = Status(StatusCode::protocol_error,
                              what + ": received " + std::to_string(got) + " bytes, expected " +
                                  std::to_string(bytes) +
                                  " (sender and receiver disagree on shape or dtype)");
      }
      slot->arrived_s = wall_seconds();
      slot->done = true;
      slot->cv.notify_all();
    };
    const auto id = g->recv(slot->peer, group::user_tag(static_cast<std::int32_t>(slot->tag)),
                            TF_TensorData(slot->tensor), bytes, std::move(done));
    {
      std::lock_guard sl(slot->mu);
      slot->id = id;
    }
    g_table[slot->tag] = slot;
  }
  TF_DeleteStatus(st);
}

// ---- TictacPullWait -------------------------------------------------------------------------

struct WaitKernel {
  std::int64_t tag = 0;
  TF_DataType dtype = TF_FLOAT;
};

void* wait_create(TF_OpKernelConstruction* ctx) {
  auto* k = new WaitKernel;
  AttrReader a(ctx);
  k->tag = a.i64("tag");
  k->dtype = a.type("dtype");
  return k;
}

void wait_delete(void* k) { delete static_cast<WaitKernel*>(k); }

void wait_compute(void* kp, TF_OpKernelContext* ctx) {
  auto* k = static_cast<WaitKernel*>(kp);
  group::Group* g = require_group(ctx, "TictacPullWait");
  if (g == nullptr) return;
  const std::string who = "TictacPullWait on rank " + std::to_string(g->rank());
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard lock(g_table_mu);
    auto found = g_table.find(k->tag);
    if (found != g_table.end()) {
      if (found->second->generation == session_generation()) slot = found->second;
      g_table.erase(found);
    }
  }
  if (slot == nullptr) {
    fail(ctx, TF_FAILED_PRECONDITION,
         who + ": tag " + std::to_string(k->tag) +
             " was not started (call TictacPullStart / tictac.tf.pull_start / "
             "ParameterClient.start_pull for it first; each start is waited for once)");
    return;
  }
  if (slot->dtype != k->dtype) {
    fail(ctx, TF_INVALID_ARGUMENT, who + ": tag " + std::to_string(k->tag) + " was started as dtype " +
                                       std::to_string(slot->dtype) + ", waited for as dtype " +
                                       std::to_string(k->dtype));
    return;  // the receive still lands in the slot, freed with it
  }
  std::unique_lock sl(slot->mu);
  const auto deadline = std::chrono::steady_clock::now() + g->timeout();
  if (!slot->cv.wait_until(sl, deadline, [&] { return slot->done; })) {
    const auto id = slot->id;
    sl.unlock();
    g->cancel(id);
    sl.lock();
    slot->cv.wait(sl, [&] { return slot->done; });  // the transport lets go of the buffer
    if (!slot->status.ok()) {  // else it landed while being cancelled: hand it over
      fail(ctx, TF_DEADLINE_EXCEEDED,
           who + " timed out after " + std::to_string(g->timeout().count()) + " ms waiting for: " +
               describe(*slot) + "; the receive was cancelled (a dead or stuck peer, or the "
               "sender never sent this tag?)");
      return;
    }
  }
  if (!slot->status.ok()) {
    fail(ctx, tf_code(slot->status), who + ": " + slot->status.message());
    return;
  }
  TF_Status* st = TF_NewStatus();
  TF_SetOutput(ctx, 0, slot->tensor, st);  // shares the buffer: no copy
  if (TF_GetCode(st) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, st);
    TF_DeleteStatus(st);
    return;
  }
  TF_Tensor* t = TF_AllocateOutput(ctx, 1, TF_DOUBLE, nullptr, 0, sizeof(double), st);
  if (TF_GetCode(st) != TF_OK) {
    TF_OpKernelContext_Failure(ctx, st);
  } else {
    *static_cast<double*>(TF_TensorData(t)) = slot->arrived_s;
    TF_DeleteTensor(t);
  }
  TF_DeleteStatus(st);
}

// ---- TictacStamp ----------------------------------------------------------------------------

void* stamp_create(TF_OpKernelConstruction*) { return nullptr; }
void stamp_delete(void*) {}

void stamp_compute(void*, TF_OpKernelContext* ctx) {
  TF_Status* st = TF_NewStatus();
  TF_Tensor* x = nullptr;
  TF_GetInput(ctx, 0, &x, st);
  if (TF_GetCode(st) == TF_OK) TF_SetOutput(ctx, 0, x, st);
  if (TF_GetCode(st) == TF_OK) {
    TF_Tensor* t = TF_AllocateOutput(ctx, 1, TF_DOUBLE, nullptr, 0, sizeof(double), st);
    if (TF_GetCode(st) == TF_OK) {
      *static_cast<double*>(TF_TensorData(t)) = wall_seconds();
      TF_DeleteTensor(t);
    }
  }
  if (TF_GetCode(st) != TF_OK) TF_OpKernelContext_Failure(ctx, st);
  if (x != nullptr) TF_DeleteTensor(x);
  TF_DeleteStatus(st);
}

// y has x's shape; time_s is a scalar.
void stamp_shape(TF_ShapeInferenceContext* ctx, TF_Status* st) {
  TF_ShapeHandle* x = TF_NewShapeHandle();
  TF_ShapeInferenceContextGetInput(ctx, 0, x, st);
  if (TF_GetCode(st) == TF_OK) TF_ShapeInferenceContextSetOutput(ctx, 0, x, st);
  TF_DeleteShapeHandle(x);
  if (TF_GetCode(st) != TF_OK) return;
  TF_ShapeHandle* scalar = TF_ShapeInferenceContextScalar(ctx);
  TF_ShapeInferenceContextSetOutput(ctx, 1, scalar, st);
  TF_DeleteShapeHandle(scalar);
}

struct Registrar {
  Registrar() {
    register_op("TictacPullStart", {"priorities: int64"}, {},
                {"tags: list(int) >= 0", "src_ranks: list(int) >= 0", "ranks: list(int) >= 0",
                 "dims: list(int) >= 0", "T: list(type) >= 0"},
                &start_create, &start_compute, &start_delete, true);
    register_op("TictacPullWait", {}, {"out: dtype", "arrived_s: float64"},
                {"tag: int >= 0", "dtype: type"}, &wait_create, &wait_compute, &wait_delete, true);
    register_op("TictacStamp", {"x: T"}, {"y: T", "time_s: float64"}, {"T: type"}, &stamp_create,
                &stamp_compute, &stamp_delete, false, &stamp_shape);
  }
} registrar;

}  // namespace
