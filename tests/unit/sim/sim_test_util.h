// Helpers for the simulator tests: build small graphs and hand-made schedules.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "priority/graph.h"
#include "priority/schedule.h"

namespace tictac::priority::sim::testing {

// prefix + number, built by appending (GCC 12 at -O3 warns falsely on "literal" + string).
inline std::string numbered(const char* prefix, long long n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

inline OpSpec recv_time(std::string name, double time, std::vector<std::string> inputs = {}) {
  OpSpec s;
  s.name = std::move(name);
  s.kind = OpKind::recv;
  s.time = time;
  s.inputs = std::move(inputs);
  return s;
}

inline OpSpec recv_bytes(std::string name, std::uint64_t bytes) {
  OpSpec s;
  s.name = std::move(name);
  s.kind = OpKind::recv;
  s.bytes = bytes;
  return s;
}

inline OpSpec compute(std::string name, double time, std::vector<std::string> inputs) {
  OpSpec s;
  s.name = std::move(name);
  s.kind = OpKind::compute;
  s.time = time;
  s.inputs = std::move(inputs);
  return s;
}

inline Graph build(std::vector<OpSpec> specs) {
  Result<Graph> g = Graph::build(std::move(specs));
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::move(g).value();
}

inline Schedule fixed(std::vector<std::int64_t> priority) {
  return Schedule{"hand", std::move(priority)};
}

}  // namespace tictac::priority::sim::testing
