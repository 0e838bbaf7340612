// Shared helpers of TicTac's TF op library (tictac_tf_ops.cc, pull_stream_ops.cc), written only
// against TF's stable C kernel API.
//   - the process-wide session: open_session / close_session (TictacInit / TictacShutdown),
//     current_group(), require_group() (fails the op with FAILED_PRECONDITION when there is
//     none), session_generation() (changes at every open, so per-session state can tell
//     leftovers of an earlier session apart);
//   - errors: fail() sets a kernel's failure, tf_code() maps a tictac Status code to a TF code,
//     construction_failure() fails kernel construction with INVALID_ARGUMENT;
//   - AttrReader: reads attributes at construction, the first error fails construction;
//   - register_op(): an op definition with unknown output shapes plus its CPU kernel.
// Thread-safe: the session is guarded by one mutex; the rest has no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "integration/group/group.h"
#include "tensorflow/c/kernels.h"
#include "tensorflow/c/ops.h"
#include "tensorflow/c/tf_status.h"

namespace tictac::tf_ops {

// Joins the process-wide group; idempotent for the same arguments, invalid_argument for others.
Status open_session(int rank, int size, const std::string& store_spec, std::int64_t timeout_ms,
                    const std::string& prefix);
// Closes the group (pending transfers fail); a no-op without one.
void close_session();
// nullptr before open_session. The group stays valid until close_session.
group::Group* current_group();
// current_group(), or nullptr after failing `ctx` with FAILED_PRECONDITION naming `op`.
group::Group* require_group(TF_OpKernelContext* ctx, const char* op);
// 0 before the first open; then a new value at every successful open.
std::uint64_t session_generation();

void fail(TF_OpKernelContext* ctx, TF_Code code, const std::string& message);
TF_Code tf_code(const Status& s);
void construction_failure(TF_OpKernelConstruction* ctx, const std::string& message);

// Reads attributes of the kernel being constructed; after the first error every read returns a
// default and `ok` is false (construction has been failed with that error).
class AttrReader {
 public:
  explicit AttrReader(TF_OpKernelConstruction* ctx);
  ~AttrReader();
  AttrReader(const AttrReader&) = delete;
  AttrReader& operator=(const AttrReader&) = delete;

  std::int64_t i64(const char* name);
  std::vector<std::int64_t> i64s(const char* name);
  std::vector<TF_DataType> types(const char* name);
  TF_DataType type(const char* name);
  std::string str(const char* name);
  bool ok() const { return ok_; }

 private:
  bool check();
  TF_OpKernelConstruction* ctx_;
  TF_Status* st_;
  bool ok_ = true;
};

// One tensor of a batched pull: its tag, the rank it comes from, dtype and shape.
struct TensorSpec {
  std::int64_t tag = 0, peer = 0;
  TF_DataType dtype = TF_FLOAT;
  std::vector<std::int64_t> dims;
};

// Reads a batched pull's attributes (`tags`, `src_ranks`, `ranks`, `dims` (the shapes
// concatenated), `T`) into one TensorSpec per tensor. On an attribute error or inconsistent
// lengths the construction is failed (messages start with `op`) and false is returned.
bool read_tensor_specs(TF_OpKernelConstruction* ctx, AttrReader& a, const std::string& op,
                       std::vector<TensorSpec>& out);

// Input `index` as the op's priorities: an int64 tensor of `n` elements. Returns it (the caller
// frees it with TF_DeleteTensor) or nullptr after failing the kernel with the reason.
TF_Tensor* priorities_input(TF_OpKernelContext* ctx, int index, std::int64_t n, const std::string& op);

using CreateFn = void* (*)(TF_OpKernelConstruction*);
using ComputeFn = void (*)(void*, TF_OpKernelContext*);
using DeleteFn = void (*)(void*);
using ShapeFn = void (*)(TF_ShapeInferenceContext*, TF_Status*);

// Registers op `name` (inputs, outputs, attrs in TF's op-definition syntax) and its CPU kernel.
// `stateful`: never folded, pruned or deduplicated, and in a tf.function ordered after every
// earlier stateful op without resource inputs (automatic control dependencies). TF 2.21's
// TF_OpDefinitionBuilderSetIsStateful ignores its bool and always marks the op stateful, so it is
// called only when `stateful` is true. `shape`: the shape function (nullptr: every output's
// shape is unknown). Registration errors are printed to stderr.
void register_op(const char* name, const std::vector<const char*>& inputs,
                 const std::vector<const char*>& outputs, const std::vector<const char*>& attrs,
                 CreateFn create, ComputeFn compute, DeleteFn destroy, bool stateful,
                 ShapeFn shape = nullptr);

}  // namespace tictac::tf_ops
