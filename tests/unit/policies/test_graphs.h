// Small graph builders for the policy tests: hand-written graphs and seeded random DAGs with
// many ties (equal recv times, zero compute times). Header-only; deterministic.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "priority/graph.h"

namespace tictac::priority::testing {

inline OpSpec recv_op(std::string name, double time) {
  OpSpec s;
  s.name = std::move(name);
  s.kind = OpKind::recv;
  s.time = time;
  return s;
}

inline OpSpec recv_bytes(std::string name, std::uint64_t bytes) {
  OpSpec s;
  s.name = std::move(name);
  s.kind = OpKind::recv;
  s.bytes = bytes;
  return s;
}

inline OpSpec compute_op(std::string name, std::vector<std::string> inputs, double time) {
  OpSpec s;
  s.name = std::move(name);
  s.inputs = std::move(inputs);
  s.time = time;
  return s;
}

// "prefix" + number, written so that GCC 12's -Wrestrict false positive on
// operator+(const char*, std::string) does not trigger at -O3.
inline std::string numbered(std::string_view prefix, long long n) {
  std::string out(prefix);
  out.append(std::to_string(n));
  return out;
}

inline Graph build_or_die(std::vector<OpSpec> specs) {
  Result<Graph> g = Graph::build(std::move(specs));
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::move(g).value();
}

// w1 -> layer1 -> layer2 ...; layer i consumes w_i and layer i-1.
inline Graph chain_graph(int n, double recv_time, double compute_time) {
  std::vector<OpSpec> specs;
  for (int i = 1; i <= n; ++i) {
    specs.push_back(recv_op(numbered("w", i), recv_time));
    std::vector<std::string> in = {numbered("w", i)};
    if (i > 1) in.push_back(numbered("layer", i - 1));
    specs.push_back(compute_op(numbered("layer", i), in, compute_time));
  }
  return build_or_die(std::move(specs));
}

// SCHEDULING.md 5.4: recv A (2) unlocks 5 of compute, recv B (4) unlocks 1.
inline Graph ab_graph() {
  return build_or_die({recv_op("A", 2), recv_op("B", 4), compute_op("a", {"A"}, 5),
                       compute_op("b", {"B"}, 1)});
}

enum class Shape { wide, chainy, parallel, mixed };

struct RandomDagOptions {
  int recvs = 6;
  int computes = 12;
  Shape shape = Shape::mixed;
  bool tie_heavy = false;    // recv times in {1,2} ms, compute times in {0,1} ms
  bool use_bytes = false;    // recvs carry bytes instead of time
  bool recv_inputs = false;  // some recvs consume a compute op (not looked through)
};

// Seeded random DAG. Names are shuffled so name order differs from file order.
inline Graph random_dag(std::uint64_t seed, const RandomDagOptions& o) {
  std::mt19937_64 rng(seed);
  auto pick = [&](std::uint64_t n) { return static_cast<std::size_t>(rng() % n); };
  std::vector<int> label(static_cast<std::size_t>(o.recvs));
  for (int i = 0; i < o.recvs; ++i) label[i] = i;
  for (int i = o.recvs - 1; i > 0; --i) std::swap(label[i], label[pick(i + 1)]);
  std::vector<OpSpec> specs;
  std::vector<std::string> names;  // all ops so far
  std::vector<std::string> computes;
  auto recv_time = [&]() { return o.tie_heavy ? 1e-3 * static_cast<double>(1 + pick(2)) : 1e-4 * static_cast<double>(1 + pick(50)); };
  auto comp_time = [&]() { return o.tie_heavy ? 1e-3 * static_cast<double>(pick(2)) : 1e-4 * static_cast<double>(pick(40)); };
  int next_recv = 0;
  const int total = o.recvs + o.computes;
  for (int i = 0; i < total; ++i) {
    const int left_recvs = o.recvs - next_recv, left_ops = total - i;
    const bool make_recv = left_recvs > 0 && (left_recvs == left_ops || names.empty() || pick(static_cast<std::uint64_t>(left_ops)) < static_cast<std::size_t>(left_recvs));
    if (make_recv) {
      const std::string name = numbered("p", label[next_recv++]);
      OpSpec s = o.use_bytes ? recv_bytes(name, (o.tie_heavy ? 1000 : 100 * (1 + pick(50)))) : recv_op(name, recv_time());
      if (o.recv_inputs && !computes.empty() && pick(4) == 0) s.inputs.push_back(computes[pick(computes.size())]);
      specs.push_back(std::move(s));
      names.push_back(name);
      continue;
    }
    std::vector<std::string> in;
    Shape shape = o.shape;
    if (shape == Shape::mixed) shape = static_cast<Shape>(pick(3));
    const std::size_t k = 1 + pick(3);
    for (std::size_t j = 0; j < k; ++j) {
      std::size_t idx;
      if (shape == Shape::chainy) {
        idx = names.size() - 1 - pick(std::min<std::size_t>(names.size(), 3));
      } else if (shape == Shape::parallel && j == 0 && !computes.empty() && pick(2) == 0) {
        in.push_back(computes[pick(computes.size())]);
        continue;
      } else {
        idx = pick(names.size());
      }
      in.push_back(names[idx]);
    }
    const std::string name = numbered("c", i);
    specs.push_back(compute_op(name, in, comp_time()));
    names.push_back(name);
    computes.push_back(name);
  }
  return build_or_die(std::move(specs));
}

}  // namespace tictac::priority::testing
