// tensors.h: the tensor helpers of the backend's translation units.
#include "integration/torch/tensors.h"

#include <c10/util/Exception.h>

#include <cstring>

namespace tictac::torch_adapter {

at::Tensor flatten(const std::vector<at::Tensor>& tensors) {
  if (tensors.size() == 1 && tensors[0].is_contiguous() && tensors[0].device().is_cpu()) {
    return tensors[0];
  }
  return flatten_copy(tensors);
}

at::Tensor flatten_copy(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> parts;
  for (const at::Tensor& t : tensors) parts.push_back(t.reshape({-1}).to(at::kCPU));
  if (parts.empty()) return at::empty({0});
  at::Tensor out = at::cat(parts);
  if (tensors.size() == 1 && out.data_ptr() == tensors[0].data_ptr()) out = out.clone();
  return out;
}

void scatter_back(const at::Tensor& flat, std::vector<at::Tensor>& tensors) {
  if (tensors.size() == 1 && flat.data_ptr() == tensors[0].data_ptr()) return;
  int64_t offset = 0;
  for (at::Tensor& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

at::Tensor pack_bytes(const std::vector<at::Tensor>& tensors) {
  int64_t total = 0;
  for (const at::Tensor& t : tensors) total += static_cast<int64_t>(t.nbytes());
  at::Tensor out = at::empty({total}, at::TensorOptions().dtype(at::kByte));
  auto* dst = static_cast<std::uint8_t*>(out.data_ptr());
  for (const at::Tensor& t : tensors) {
    const at::Tensor c = t.contiguous().to(at::kCPU);
    if (c.nbytes() > 0) std::memcpy(dst, c.data_ptr(), c.nbytes());
    dst += c.nbytes();
  }
  return out;
}

void unpack_into(const void* src, at::Tensor& t) {
  if (t.numel() == 0) return;
  at::Tensor view = at::from_blob(const_cast<void*>(src), t.sizes(),
                                  at::TensorOptions().dtype(t.scalar_type()));
  t.copy_(view);
}

void check_same_dtype(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK(!tensors.empty(), "tictac ", op, ": no tensors given");
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), "tictac ", op,
                ": all tensors must have one dtype");
    TORCH_CHECK(!t.is_sparse(), "tictac ", op, ": sparse tensors are not supported");
  }
}

namespace {

// acc = (acc + in) / world in one pass: the same result as add_ then div_ (each element is
// rounded after the sum and after the division either way).
template <typename T>
group::ReduceFn sum_then_divide(int world) {
  return [world](void* acc, const void* in, std::size_t n) {
    T* a = static_cast<T*>(acc);
    const T* b = static_cast<const T*>(in);
    const T w = static_cast<T>(world);
    for (std::size_t i = 0; i < n; ++i) a[i] = (a[i] + b[i]) / w;
  };
}

}  // namespace

Reduction make_reduction(const c10d::ReduceOp& rop, at::ScalarType dtype, int world,
                         const char* what) {
  const auto op = rop.op_;
  const bool floating = at::isFloatingType(dtype) || at::isComplexType(dtype);
  TORCH_CHECK(op != c10d::ReduceOp::AVG || floating, "tictac ", what,
              ": AVG needs a floating-point tensor, got ", dtype);
  TORCH_CHECK(op != c10d::ReduceOp::PREMUL_SUM || floating, "tictac ", what,
              ": PREMUL_SUM needs a floating-point tensor, got ", dtype);
  TORCH_CHECK(op != c10d::ReduceOp::UNUSED, "tictac ", what, ": unsupported reduce op");
  Reduction red;
  red.fn = [dtype, op](void* acc, const void* in, std::size_t n) {
    const auto opts = at::TensorOptions().dtype(dtype);
    at::Tensor a = at::from_blob(acc, {static_cast<int64_t>(n)}, opts);
    at::Tensor b = at::from_blob(const_cast<void*>(in), {static_cast<int64_t>(n)}, opts);
    switch (op) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::AVG:
      case c10d::ReduceOp::PREMUL_SUM: a.add_(b); break;
      case c10d::ReduceOp::PRODUCT: a.mul_(b); break;
      case c10d::ReduceOp::MIN: at::minimum_out(a, a, b); break;
      case c10d::ReduceOp::MAX: at::maximum_out(a, a, b); break;
      case c10d::ReduceOp::BAND: a.bitwise_and_(b); break;
      case c10d::ReduceOp::BOR: a.bitwise_or_(b); break;
      case c10d::ReduceOp::BXOR: a.bitwise_xor_(b); break;
      default: TORCH_CHECK(false, "tictac: unsupported reduce op");
    }
  };
  if (op == c10d::ReduceOp::AVG) {
    red.post = [world](at::Tensor& t) { t.div_(world); };
    if (dtype == at::kFloat) red.fn_then_post = sum_then_divide<float>(world);
    if (dtype == at::kDouble) red.fn_then_post = sum_then_divide<double>(world);
  }
  if (op == c10d::ReduceOp::PREMUL_SUM) {
    const auto* sup = dynamic_cast<const c10d::PreMulSumSupplement*>(rop.supplement_.get());
    TORCH_CHECK(sup != nullptr, "tictac ", what, ": PREMUL_SUM without a factor");
    if (sup->tensor_factor.defined()) {
      const at::Tensor factor = sup->tensor_factor.to(at::kCPU);
      red.pre = [factor](at::Tensor& t) { t.mul_(factor); };
    } else {
      const double factor = sup->double_factor;
      red.pre = [factor](at::Tensor& t) { t.mul_(factor); };
    }
  }
  return red;
}

}  // namespace tictac::torch_adapter
