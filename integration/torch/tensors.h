// Tensor helpers shared by the backend's translation units (backend.cc, collectives.cc):
// flattening tensor lists into one CPU buffer and back, byte packing of mixed-dtype lists, and
// the reduction of a c10d::ReduceOp (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR, PREMUL_SUM).
// Pure functions over tensors; no threads, no group.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

#include "integration/group/group.h"

namespace tictac::torch_adapter {

// A contiguous CPU tensor with the elements of `tensors` end to end: the tensor itself when
// there is one contiguous CPU tensor, else a copy (write results back with scatter_back).
at::Tensor flatten(const std::vector<at::Tensor>& tensors);
// A contiguous CPU copy that never shares memory with `tensors` (inputs that must survive).
at::Tensor flatten_copy(const std::vector<at::Tensor>& tensors);
// Copies `flat` back into `tensors` (nothing when `flat` is the single tensor itself).
void scatter_back(const at::Tensor& flat, std::vector<at::Tensor>& tensors);
// The tensors' bytes end to end in one uint8 CPU tensor (dtypes may differ).
at::Tensor pack_bytes(const std::vector<at::Tensor>& tensors);
// Copies t.nbytes() bytes at `src` (laid out as a contiguous `t`) into `t` (any device/layout).
void unpack_into(const void* src, at::Tensor& t);
// TORCH_CHECKs: non-empty, one dtype, dense.
void check_same_dtype(const std::vector<at::Tensor>& tensors, const char* op);

// A reduction: `pre` runs on this rank's contribution before the exchange (PREMUL_SUM's
// factor), `fn` folds a peer's elements in, `post` runs on the result (AVG's division).
struct Reduction {
  group::ReduceFn fn;
  std::function<void(at::Tensor&)> pre;
  std::function<void(at::Tensor&)> post;
  // `fn` and `post` in one pass (AVG on float and double: (acc + in) / world), for a collective
  // whose last fold produces the result (the out-of-place reduce-scatter); empty otherwise.
  group::ReduceFn fn_then_post;
};
// TORCH_CHECKs that `op` is usable on `dtype` (AVG and PREMUL_SUM need floating point).
Reduction make_reduction(const c10d::ReduceOp& op, at::ScalarType dtype, int world,
                         const char* what);

}  // namespace tictac::torch_adapter
