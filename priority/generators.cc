#include "priority/generators.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/random.h"

namespace tictac::priority {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;
constexpr int kMaxGeneratedOps = 100'000'000;  // ~100 GB of OpSpecs would be needed beyond this

// Parameter-like sizes spread over orders of magnitude: [2^lo_log2, 2^(hi_log2+1)), multiple of 4.
std::uint64_t param_bytes(Rng& rng, int lo_log2, int hi_log2) {
  const int mag = rng.uniform_int(lo_log2, hi_log2);
  const std::uint64_t base = std::uint64_t{1} << mag;
  return (base + rng.uniform_u64(0, base - 1)) & ~std::uint64_t{3};
}

OpSpec recv(std::string name, std::uint64_t bytes) {
  OpSpec s;
  s.name = std::move(name);
  s.kind = OpKind::recv;
  s.bytes = bytes;
  return s;
}

OpSpec compute(std::string name, std::vector<std::string> inputs, double time) {
  OpSpec s;
  s.name = std::move(name);
  s.kind = OpKind::compute;
  s.inputs = std::move(inputs);
  s.time = time;
  return s;
}

Status check_time(const char* what, double t) {
  if (!std::isfinite(t) || t < 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", t);
    return invalid_argument(std::string(what) + " must be a finite number of seconds >= 0, got " +
                            buf);
  }
  return Status::Ok();
}

Status check_range(const char* what, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi) {
    return invalid_argument(std::string(what) + " must be in [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "], got " + std::to_string(v));
  }
  return Status::Ok();
}

std::string num(const char* prefix, std::int64_t i) { return prefix + std::to_string(i); }

}  // namespace

Result<Graph> make_chain(int layers, std::uint64_t bytes_per_param, double compute_time) {
  TICTAC_RETURN_IF_ERROR(check_range("chain layers", layers, 1, kMaxGeneratedOps / 2));
  TICTAC_RETURN_IF_ERROR(check_time("chain compute time", compute_time));
  std::vector<OpSpec> specs;
  specs.reserve(static_cast<std::size_t>(layers) * 2);
  for (int i = 1; i <= layers; ++i) {
    specs.push_back(recv(num("w", i), bytes_per_param));
    std::vector<std::string> inputs{num("w", i)};
    if (i > 1) inputs.push_back(num("layer", i - 1));
    specs.push_back(compute(num("layer", i), std::move(inputs), compute_time));
  }
  return Graph::build(std::move(specs));
}

Result<Graph> make_seq32(double compute_time_per_layer) {
  TICTAC_RETURN_IF_ERROR(check_time("seq-32 compute time", compute_time_per_layer));
  return make_chain(32, 2 * kMiB, compute_time_per_layer);
}

Result<Graph> make_par32(double compute_time_per_op) {
  TICTAC_RETURN_IF_ERROR(check_time("par-32 compute time", compute_time_per_op));
  std::vector<OpSpec> specs;
  std::vector<std::string> joined;
  for (int i = 1; i <= 32; ++i) {
    specs.push_back(recv(num("w", i), 2 * kMiB));
    specs.push_back(compute(num("op", i), {num("w", i)}, compute_time_per_op));
    joined.push_back(num("op", i));
  }
  specs.push_back(compute("join", std::move(joined), compute_time_per_op));
  return Graph::build(std::move(specs));
}

Result<Graph> make_inception_like(int modules, int branches, std::uint64_t seed) {
  TICTAC_RETURN_IF_ERROR(check_range("inception modules", modules, 1, 100'000));
  TICTAC_RETURN_IF_ERROR(check_range("inception branches", branches, 1, 64));
  Rng rng(seed);
  std::vector<OpSpec> specs;
  // A conv layer: its weights (a recv) and the conv op fed by `input` and the weights.
  auto conv = [&](const std::string& name, const std::string& input, int lo_log2, int hi_log2) {
    specs.push_back(recv(name + "/w", param_bytes(rng, lo_log2, hi_log2)));
    std::vector<std::string> inputs{name + "/w"};
    if (!input.empty()) inputs.push_back(input);
    specs.push_back(compute(name, std::move(inputs), rng.uniform(2e-4, 2e-3)));
    return name;
  };
  std::string prev;
  for (int i = 1; i <= 3; ++i) prev = conv(num("stem/conv", i), prev, 12, 17);
  for (int m = 1; m <= modules; ++m) {
    const std::string mod = num("m", m);
    std::vector<std::string> tails;
    for (int b = 1; b <= branches; ++b) {
      const std::string branch = mod + num("/b", b);
      std::string tail = prev;
      const int depth = rng.uniform_int(1, 3);
      for (int l = 1; l <= depth; ++l) tail = conv(branch + num("/conv", l), tail, 14, 21);
      tails.push_back(tail);
    }
    specs.push_back(compute(mod + "/concat", std::move(tails), rng.uniform(2e-5, 1e-4)));
    prev = mod + "/concat";
  }
  prev = conv("head/fc", prev, 22, 22);
  specs.push_back(compute("head/softmax", {prev}, 2e-5));
  return Graph::build(std::move(specs));
}

Result<Graph> make_random_dag(int ops, int recvs, std::uint64_t seed) {
  TICTAC_RETURN_IF_ERROR(check_range("random DAG ops", ops, 2, kMaxGeneratedOps));
  TICTAC_RETURN_IF_ERROR(check_range("random DAG recvs", recvs, 1, ops - 1));
  const std::int64_t computes = ops - recvs;
  if (recvs > 3 * computes) {
    return invalid_argument("random DAG: " + std::to_string(recvs) + " recvs need at least " +
                            std::to_string((recvs + 2) / 3) +
                            " compute ops to consume them (each takes at most 3 inputs); got " +
                            std::to_string(computes));
  }
  Rng rng(seed);
  std::vector<OpSpec> specs;
  specs.reserve(static_cast<std::size_t>(ops));
  std::vector<int> pending;  // recvs not yet consumed, by index into specs
  std::int64_t left_r = recvs, left_c = computes;
  for (int i = 0; i < ops; ++i) {
    // Invariant: pending + left_r <= 3 * left_c, so every recv can still be consumed.
    const std::int64_t p = static_cast<std::int64_t>(pending.size());
    const bool must_recv = i == 0 || left_c == 0 || left_r > 3 * (left_c - 1);
    bool is_recv = must_recv;
    if (!must_recv && left_r > 0) {
      is_recv = rng.uniform_u64(1, static_cast<std::uint64_t>(left_r + left_c)) <=
                static_cast<std::uint64_t>(left_r);
    }
    if (is_recv) {
      specs.push_back(recv(num("r", i), param_bytes(rng, 10, 23)));
      pending.push_back(i);
      --left_r;
      continue;
    }
    // Consume enough pending recvs to keep the invariant, and at least one when there is one.
    const std::int64_t need = std::max<std::int64_t>(p + left_r - 3 * (left_c - 1), p > 0 ? 1 : 0);
    const int k = std::min(std::max(static_cast<int>(need), rng.uniform_int(1, 3)), i);
    std::vector<int> chosen;
    for (std::int64_t c = 0; c < need; ++c) {
      const std::size_t at = rng.uniform_u64(0, pending.size() - 1);
      chosen.push_back(pending[at]);
      pending[at] = pending.back();
      pending.pop_back();
    }
    while (static_cast<int>(chosen.size()) < k) {
      const int cand = rng.uniform_int(0, i - 1);
      if (std::find(chosen.begin(), chosen.end(), cand) != chosen.end()) continue;
      chosen.push_back(cand);
      // A random pick of a pending recv consumes it too.
      for (std::size_t q = 0; q < pending.size(); ++q) {
        if (pending[q] == cand) {
          pending[q] = pending.back();
          pending.pop_back();
          break;
        }
      }
    }
    std::vector<std::string> inputs;
    for (int c : chosen) inputs.push_back(specs[static_cast<std::size_t>(c)].name);
    specs.push_back(compute(num("c", i), std::move(inputs), rng.uniform(1e-5, 1e-3)));
    --left_c;
  }
  return Graph::build(std::move(specs));
}

Result<Graph> make_layered(int ops, int recvs, std::uint64_t seed) {
  TICTAC_RETURN_IF_ERROR(check_range("layered ops", ops, 2, kMaxGeneratedOps));
  TICTAC_RETURN_IF_ERROR(check_range("layered recvs", recvs, 1, ops / 2));
  Rng rng(seed);
  // Parameters per layer: 1-4 (weights, bias, norm scale/shift), the last layer takes the rest.
  std::vector<int> params;
  for (int left = recvs; left > 0;) {
    const int n = std::min(left, rng.uniform_int(1, 4));
    params.push_back(n);
    left -= n;
  }
  const std::int64_t layers = static_cast<std::int64_t>(params.size());
  const std::int64_t computes = ops - recvs;  // >= recvs >= layers
  // Compute ops per layer: even split, then shuffled between neighbours so layers differ.
  std::vector<std::int64_t> count(static_cast<std::size_t>(layers), computes / layers);
  for (std::int64_t k = 0; k < computes % layers; ++k) ++count[static_cast<std::size_t>(k)];
  const std::int64_t max_move = std::max<std::int64_t>(computes / layers / 2, 0);
  for (std::size_t k = 0; k + 1 < count.size(); ++k) {
    const bool forward = rng.chance(0.5);
    std::int64_t& from = forward ? count[k] : count[k + 1];
    std::int64_t& to = forward ? count[k + 1] : count[k];
    const std::int64_t limit = std::min(max_move, from - 1);
    if (limit <= 0) continue;
    const std::int64_t d =
        static_cast<std::int64_t>(rng.uniform_u64(0, static_cast<std::uint64_t>(limit)));
    from -= d;
    to += d;
  }
  std::vector<OpSpec> specs;
  specs.reserve(static_cast<std::size_t>(ops));
  std::string prev;  // the previous layer's output op
  for (std::int64_t k = 0; k < layers; ++k) {
    const std::string layer = num("l", k) + "/";
    const int np = params[static_cast<std::size_t>(k)];
    const std::int64_t c = count[static_cast<std::size_t>(k)];
    for (int j = 0; j < np; ++j) {
      // The first parameter is the big one (weights), the others are vectors (bias, norm).
      specs.push_back(
          recv(layer + num("w", j), j == 0 ? param_bytes(rng, 14, 23) : param_bytes(rng, 8, 13)));
    }
    const std::size_t first = specs.size();
    auto add = [&](std::int64_t i, std::vector<std::string> inputs) {
      specs.push_back(
          compute(layer + num("op", i), std::move(inputs), rng.uniform(5e-6, 2e-4)));
      return specs.back().name;
    };
    std::vector<std::string> head_in;
    if (!prev.empty()) head_in.push_back(prev);
    std::string tail = add(0, std::move(head_in));
    if (c >= 4 && rng.chance(0.15)) {
      // Branch after the head op into two chains, joined by the layer's last op.
      const std::int64_t a = (c - 2) / 2;
      std::string ta = tail, tb = tail;
      for (std::int64_t i = 1; i <= a; ++i) ta = add(i, {ta});
      for (std::int64_t i = a + 1; i <= c - 2; ++i) tb = add(i, {tb});
      tail = add(c - 1, {ta, tb});
    } else {
      for (std::int64_t i = 1; i < c; ++i) tail = add(i, {tail});
    }
    // Parameter j feeds the layer's j-th op (the last op when the layer has fewer ops).
    for (int j = 0; j < np; ++j) {
      const std::size_t at = first + static_cast<std::size_t>(std::min<std::int64_t>(j, c - 1));
      specs[at].inputs.push_back(layer + num("w", j));
    }
    prev = tail;
  }
  return Graph::build(std::move(specs));
}

}  // namespace tictac::priority
