// The c10d collectives beyond allreduce/broadcast/allgather/barrier: the torch side of
// integration/group's ring.h and rooted.h (argument checks, flattening, dtype reductions).
// Every op runs on the collective thread through TicTacBackend::collective(); tensors the
// user passes as inputs are never modified.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <numeric>

#include "integration/group/gate.h"
#include "integration/group/ring.h"
#include "integration/group/rooted.h"
#include "integration/torch/backend.h"
#include "integration/torch/tensors.h"

namespace tictac::torch_adapter {
namespace {

int check_root(int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "tictac ", op, ": root rank ", root,
              " is outside a group of ", size);
  return static_cast<int>(root);
}

void check_like(const at::Tensor& t, const at::Tensor& like, const char* op, const char* what) {
  TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(), "tictac ", op,
              ": every ", what, " must have the input's number of elements (", like.numel(),
              ") and dtype (", like.scalar_type(), "), got ", t.numel(), " of ", t.scalar_type());
}

std::vector<std::size_t> byte_offsets(const std::vector<std::size_t>& bytes) {
  std::vector<std::size_t> off(bytes.size(), 0);
  for (std::size_t i = 1; i < bytes.size(); ++i) off[i] = off[i - 1] + bytes[i - 1];
  return off;
}

// Per-rank row counts of an all_to_all_single split (empty = equal split of dim 0).
std::vector<int64_t> splits(const std::vector<int64_t>& given, const at::Tensor& t, int n,
                            const char* which) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (given.empty()) {
    TORCH_CHECK(rows % n == 0, "tictac all_to_all_single: the ", which,
                " tensor's first "
                "dimension (",
                rows, ") is not divisible by the world size (", n, "); pass split sizes");
    return std::vector<int64_t>(static_cast<std::size_t>(n), rows / n);
  }
  TORCH_CHECK(static_cast<int>(given.size()) == n, "tictac all_to_all_single: ", which,
              " split sizes need one entry per rank (", n, "), got ", given.size());
  const int64_t sum = std::accumulate(given.begin(), given.end(), int64_t{0});
  TORCH_CHECK(sum == rows, "tictac all_to_all_single: the ", which, " split sizes sum to ", sum,
              " but the tensor's first dimension is ", rows);
  for (int64_t v : given) {
    TORCH_CHECK(v >= 0, "tictac all_to_all_single: negative split size ", v);
  }
  return given;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> TicTacBackend::reduce(std::vector<at::Tensor>& tensors,
                                                     const c10d::ReduceOptions& opts) {
  check_same_dtype(tensors, "reduce");
  const int root = check_root(opts.rootRank, size_, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "tictac reduce: rootTensor must be 0");
  Reduction red = make_reduction(opts.reduceOp, tensors[0].scalar_type(), size_, "reduce");
  group::Group* g = group_.get();
  const bool is_root = rank_ == root;
  std::vector<at::Tensor> ts = tensors;
  return collective(c10d::OpType::REDUCE, tensors, "reduce to rank " + std::to_string(root),
                    [g, ts, red, root, is_root](transport::Priority p) mutable {
                      // Only the root's tensors are outputs; the others work on a copy.
                      at::Tensor flat = is_root ? flatten(ts) : flatten_copy(ts);
                      if (red.pre) red.pre(flat);
                      Status s =
                          group::reduce(*g, flat.data_ptr(), static_cast<std::size_t>(flat.numel()),
                                        flat.element_size(), red.fn, root, p);
                      if (!s.ok() || !is_root) return s;
                      if (red.post) red.post(flat);
                      scatter_back(flat, ts);
                      return s;
                    });
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::gather(
    std::vector<std::vector<at::Tensor>>& outputTensors, std::vector<at::Tensor>& inputTensors,
    const c10d::GatherOptions& opts) {
  const int root = check_root(opts.rootRank, size_, "gather");
  TORCH_CHECK(inputTensors.size() == 1, "tictac gather: expects one input tensor");
  const at::Tensor in = inputTensors[0];
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputTensors.size() == 1 && static_cast<int>(outputTensors[0].size()) == size_,
                "tictac gather: the root needs one output list of ", size_, " tensors");
    outs = outputTensors[0];
    for (const at::Tensor& o : outs) check_like(o, in, "gather", "output tensor");
  } else {
    TORCH_CHECK(outputTensors.empty() || (outputTensors.size() == 1 && outputTensors[0].empty()),
                "tictac gather: only the root (rank ", root, ") passes output tensors");
  }
  group::Group* g = group_.get();
  const int n = size_;
  return collective(
      c10d::OpType::GATHER, outs, "gather to rank " + std::to_string(root),
      [g, in, outs, root, n](transport::Priority p) mutable {
        at::Tensor src = in.contiguous().to(at::kCPU);
        std::vector<std::size_t> bytes(static_cast<std::size_t>(n), src.nbytes());
        if (outs.empty())
          return group::gather(*g, src.data_ptr(), src.nbytes(), nullptr, {}, root, p);
        at::Tensor flat = at::empty({n * src.numel()}, src.options());
        Status s = group::gather(*g, src.data_ptr(), src.nbytes(), flat.data_ptr(), bytes, root, p);
        if (s.ok()) scatter_back(flat, outs);
        return s;
      },
      {in});
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::scatter(
    std::vector<at::Tensor>& outputTensors, std::vector<std::vector<at::Tensor>>& inputTensors,
    const c10d::ScatterOptions& opts) {
  const int root = check_root(opts.rootRank, size_, "scatter");
  TORCH_CHECK(outputTensors.size() == 1, "tictac scatter: expects one output tensor");
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputTensors.size() == 1 && static_cast<int>(inputTensors[0].size()) == size_,
                "tictac scatter: the root needs one input list of ", size_, " tensors");
    ins = inputTensors[0];
    for (const at::Tensor& i : ins) check_like(i, outputTensors[0], "scatter", "input tensor");
  } else {
    TORCH_CHECK(inputTensors.empty() || (inputTensors.size() == 1 && inputTensors[0].empty()),
                "tictac scatter: only the root (rank ", root, ") passes input tensors");
  }
  group::Group* g = group_.get();
  std::vector<at::Tensor> outs = outputTensors;
  const int n = size_;
  return collective(
      c10d::OpType::SCATTER, outs, "scatter from rank " + std::to_string(root),
      [g, ins, outs, root, n](transport::Priority p) mutable {
        at::Tensor dst = flatten(outs);
        std::vector<std::size_t> bytes;
        at::Tensor src;
        if (!ins.empty()) {
          src = flatten_copy(ins);
          bytes.assign(static_cast<std::size_t>(n), dst.nbytes());
        }
        Status s = group::scatter(*g, src.defined() ? src.data_ptr() : nullptr, bytes,
                                  dst.data_ptr(), dst.nbytes(), root, p);
        if (s.ok()) scatter_back(dst, outs);
        return s;
      },
      ins);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::reduce_scatter(
    std::vector<at::Tensor>& outputTensors, std::vector<std::vector<at::Tensor>>& inputTensors,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputTensors.size() == 1 && inputTensors.size() == 1 &&
                  static_cast<int>(inputTensors[0].size()) == size_,
              "tictac reduce_scatter: expects one output tensor and one list of ", size_,
              " input tensors");
  const at::Tensor out = outputTensors[0];
  for (const at::Tensor& i : inputTensors[0]) check_like(i, out, "reduce_scatter", "input tensor");
  at::Tensor in = at::cat([&] {
    std::vector<at::Tensor> parts;
    for (const at::Tensor& i : inputTensors[0]) parts.push_back(i.reshape({-1}));
    return parts;
  }());
  return _reduce_scatter_base(outputTensors[0], in, opts);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::_reduce_scatter_base(
    at::Tensor& outputBuffer, at::Tensor& inputBuffer, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outs{outputBuffer};
  std::vector<at::Tensor> ins{inputBuffer};
  return reduce_scatter_tensor_coalesced(outs, ins, opts);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size() && !outputs.empty(),
              "tictac reduce_scatter_tensor: expects as many outputs as inputs (got ",
              outputs.size(), " and ", inputs.size(), ")");
  std::vector<Reduction> reds;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_ &&
                    inputs[i].scalar_type() == outputs[i].scalar_type(),
                "tictac reduce_scatter_tensor: the input must hold world_size x the output (",
                size_, " x ", outputs[i].numel(), " elements) of the same dtype, got ",
                inputs[i].numel(), " of ", inputs[i].scalar_type());
    reds.push_back(make_reduction(opts.reduceOp, inputs[i].scalar_type(), size_, "reduce_scatter"));
  }
  group::Group* g = group_.get();
  const int n = size_;
  const int me = rank_;
  std::vector<at::Tensor> outs = outputs;
  std::vector<at::Tensor> ins = inputs;
  return collective(
      c10d::OpType::REDUCE_SCATTER, outs, "reduce_scatter",
      [g, outs, ins, reds, n, me](transport::Priority p) mutable {
        for (std::size_t i = 0; i < outs.size(); ++i) {
          const auto m = static_cast<std::size_t>(outs[i].numel());
          // Contiguous host tensors in separate storages: the ring reads the input where it is
          // (no copy of world x the output) and writes the sums into the output.
          if (!reds[i].pre && ins[i].device().is_cpu() && outs[i].device().is_cpu() &&
              ins[i].is_contiguous() && outs[i].is_contiguous() &&
              !ins[i].storage().is_alias_of(outs[i].storage())) {
            // The gates are waited for once the first receives are posted.
            const bool fused = static_cast<bool>(reds[i].fn_then_post);
            Status s = group::ring_reduce_scatter_into(
                *g, ins[i].data_ptr(), outs[i].data_ptr(), group::Blocks::equal(m, n),
                ins[i].element_size(), reds[i].fn, p, "reduce_scatter",
                [] { return group::PendingGates::wait(); },
                fused ? &reds[i].fn_then_post : nullptr);
            if (!s.ok()) return s;
            // With one rank the ring copies the input: there is no fold to divide in (AVG of 1).
            if (reds[i].post && !fused) reds[i].post(outs[i]);
            continue;
          }
          Status ready = group::PendingGates::wait();
          if (!ready.ok()) return ready;
          at::Tensor flat = flatten_copy({ins[i]});
          if (reds[i].pre) reds[i].pre(flat);
          Status s =
              group::ring_reduce_scatter(*g, flat.data_ptr(), group::Blocks::equal(m, n),
                                         flat.element_size(), reds[i].fn, p, "reduce_scatter");
          if (!s.ok()) return s;
          at::Tensor mine = flat.narrow(0, static_cast<int64_t>(m) * me, static_cast<int64_t>(m));
          if (reds[i].post) reds[i].post(mine);
          std::vector<at::Tensor> one{outs[i]};
          scatter_back(mine, one);
        }
        return Status::Ok();
      },
      ins, /*body_waits_gates=*/true);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::alltoall_base(at::Tensor& outputBuffer,
                                                            at::Tensor& inputBuffer,
                                                            std::vector<int64_t>& outputSplitSizes,
                                                            std::vector<int64_t>& inputSplitSizes,
                                                            const c10d::AllToAllOptions&) {
  TORCH_CHECK(outputBuffer.scalar_type() == inputBuffer.scalar_type(),
              "tictac all_to_all_single: input and output need one dtype");
  const int n = size_;
  const std::vector<int64_t> out_rows = splits(outputSplitSizes, outputBuffer, n, "output");
  const std::vector<int64_t> in_rows = splits(inputSplitSizes, inputBuffer, n, "input");
  const auto row_bytes = [](const at::Tensor& t) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    return rows == 0 ? std::size_t{0} : t.nbytes() / static_cast<std::size_t>(rows);
  };
  std::vector<std::size_t> send_bytes, recv_bytes;
  for (int r = 0; r < n; ++r) {
    send_bytes.push_back(static_cast<std::size_t>(in_rows[static_cast<std::size_t>(r)]) *
                         row_bytes(inputBuffer));
    recv_bytes.push_back(static_cast<std::size_t>(out_rows[static_cast<std::size_t>(r)]) *
                         row_bytes(outputBuffer));
  }
  group::Group* g = group_.get();
  std::vector<at::Tensor> outs{outputBuffer};
  const at::Tensor in = inputBuffer;
  return collective(c10d::OpType::ALLTOALL_BASE, outs, "all_to_all_single",
                    [g, in, outs, send_bytes, recv_bytes](transport::Priority p) mutable {
                      at::Tensor src = flatten_copy({in});
                      at::Tensor dst = flatten(outs);
                      Status s =
                          group::alltoallv(*g, src.data_ptr(), byte_offsets(send_bytes), send_bytes,
                                           dst.data_ptr(), byte_offsets(recv_bytes), recv_bytes, p);
                      if (s.ok()) scatter_back(dst, outs);
                      return s;
                    },
                    {in});
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::alltoall(std::vector<at::Tensor>& outputTensors,
                                                       std::vector<at::Tensor>& inputTensors,
                                                       const c10d::AllToAllOptions&) {
  TORCH_CHECK(static_cast<int>(outputTensors.size()) == size_ &&
                  static_cast<int>(inputTensors.size()) == size_,
              "tictac all_to_all: expects ", size_, " output and ", size_, " input tensors");
  std::vector<std::size_t> send_bytes, recv_bytes;
  for (int r = 0; r < size_; ++r) {
    send_bytes.push_back(inputTensors[static_cast<std::size_t>(r)].nbytes());
    recv_bytes.push_back(outputTensors[static_cast<std::size_t>(r)].nbytes());
  }
  group::Group* g = group_.get();
  std::vector<at::Tensor> outs = outputTensors;
  std::vector<at::Tensor> ins = inputTensors;
  return collective(
      c10d::OpType::ALLTOALL, outs, "all_to_all",
      [g, ins, outs, send_bytes, recv_bytes](transport::Priority p) mutable {
        at::Tensor src = pack_bytes(ins);
        const std::vector<std::size_t> recv_off = byte_offsets(recv_bytes);
        at::Tensor dst = at::empty({static_cast<int64_t>(recv_off.back() + recv_bytes.back())},
                                   at::TensorOptions().dtype(at::kByte));
        Status s = group::alltoallv(*g, src.data_ptr(), byte_offsets(send_bytes), send_bytes,
                                    dst.data_ptr(), recv_off, recv_bytes, p);
        if (!s.ok()) return s;
        const auto* base = static_cast<const std::uint8_t*>(dst.data_ptr());
        for (std::size_t r = 0; r < outs.size(); ++r) unpack_into(base + recv_off[r], outs[r]);
        return s;
      },
      ins);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputTensorLists, std::vector<at::Tensor>& inputTensors,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(static_cast<int>(outputTensorLists.size()) == size_,
              "tictac allgather_coalesced: expects one output list per rank (", size_, "), got ",
              outputTensorLists.size());
  for (const auto& list : outputTensorLists) {
    TORCH_CHECK(list.size() == inputTensors.size(),
                "tictac allgather_coalesced: every output "
                "list must have as many tensors as the input list (",
                inputTensors.size(), ")");
    for (std::size_t j = 0; j < list.size(); ++j) {
      check_like(list[j], inputTensors[j], "allgather_coalesced", "output tensor");
    }
  }
  group::Group* g = group_.get();
  std::vector<at::Tensor> outs;
  for (const auto& list : outputTensorLists) outs.insert(outs.end(), list.begin(), list.end());
  std::vector<at::Tensor> ins = inputTensors;
  const int n = size_;
  return collective(
      c10d::OpType::ALLGATHER_COALESCED, outs, "allgather_coalesced",
      [g, ins, outs, n](transport::Priority p) mutable {
        at::Tensor src = pack_bytes(ins);
        const auto chunk = static_cast<std::size_t>(src.numel());
        at::Tensor all = at::empty({static_cast<int64_t>(chunk) * n}, src.options());
        Status s = g->allgather(src.data_ptr(), chunk, all.data_ptr(), p);
        if (!s.ok()) return s;
        // outs is rank-major: rank r's list, then rank r+1's; each laid out like `ins`.
        const auto* base = static_cast<const std::uint8_t*>(all.data_ptr());
        std::size_t k = 0;
        for (int r = 0; r < n; ++r) {
          std::size_t off = static_cast<std::size_t>(r) * chunk;
          for (std::size_t j = 0; j < ins.size(); ++j, ++k) {
            unpack_into(base + off, outs[k]);
            off += ins[j].nbytes();
          }
        }
        return s;
      },
      ins);
}

c10::intrusive_ptr<c10d::Work> TicTacBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "tictac allgather_into_tensor_coalesced: "
              "expects as many outputs as inputs (got ",
              outputs.size(), " and ", inputs.size(), ")");
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_ &&
                    outputs[i].scalar_type() == inputs[i].scalar_type(),
                "tictac all_gather_into_tensor: the output must hold world_size x the input (",
                size_, " x ", inputs[i].numel(), " elements) of the same dtype");
  }
  group::Group* g = group_.get();
  std::vector<at::Tensor> outs = outputs;
  std::vector<at::Tensor> ins = inputs;
  const int n = size_;
  return collective(
      c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, outs, "allgather_into_tensor_coalesced",
      [g, ins, outs, n](transport::Priority p) mutable {
        at::Tensor src = pack_bytes(ins);
        const auto chunk = static_cast<std::size_t>(src.numel());
        at::Tensor all = at::empty({static_cast<int64_t>(chunk) * n}, src.options());
        Status s = g->allgather(src.data_ptr(), chunk, all.data_ptr(), p);
        if (!s.ok()) return s;
        const auto* base = static_cast<const std::uint8_t*>(all.data_ptr());
        std::size_t off = 0;
        for (std::size_t i = 0; i < ins.size(); ++i) {
          // Output i is rank 0's input i, then rank 1's, ...
          at::Tensor flat = at::empty({outs[i].numel()}, ins[i].options().device(at::kCPU));
          const std::size_t each = ins[i].nbytes();
          auto* dst = static_cast<std::uint8_t*>(flat.data_ptr());
          for (int r = 0; r < n; ++r) {
            if (each > 0) {
              std::memcpy(dst + static_cast<std::size_t>(r) * each,
                          base + static_cast<std::size_t>(r) * chunk + off, each);
            }
          }
          off += each;
          std::vector<at::Tensor> one{outs[i]};
          scatter_back(flat, one);
        }
        return s;
      },
      ins);
}

}  // namespace tictac::torch_adapter
