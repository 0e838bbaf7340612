// priority::Graph: one iteration's computation DAG on one worker, immutable once built.
//
// Recv ops are parameter transfers, every other op is a compute op. Ops are identified by a
// dense OpId in the order they were given (file order). Graph::build validates everything and
// either returns a complete graph or an error that names the offending op (and its position in
// the source file when known); nothing is half-built. Pure value type: thread-safe to read.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace tictac::priority {

using OpId = std::uint32_t;

enum class OpKind : std::uint8_t { recv, compute };
std::string_view to_string(OpKind kind);

// Position of an op in its source file (1-based); line 0 = unknown (generated graphs).
struct SourcePos {
  int line = 0;
  int column = 0;
};

// Input to Graph::build: inputs are referenced by name and may appear in any order.
struct OpSpec {
  std::string name;
  OpKind kind = OpKind::compute;
  std::vector<std::string> inputs;
  std::optional<double> time;          // seconds; required for compute ops
  std::optional<std::uint64_t> bytes;  // recvs: size of the parameter tensor
  SourcePos pos;
};

struct Op {
  std::string name;
  OpKind kind = OpKind::compute;
  std::vector<OpId> inputs;            // deduplicated, in the order first given
  std::optional<double> time;
  std::optional<std::uint64_t> bytes;
  SourcePos pos;
};

class Graph {
 public:
  // Validates and builds. Errors (invalid_argument), each naming the op and position:
  // empty or duplicate name, unknown input, an op that is its own input, a cycle (the ops on it
  // are listed), negative or non-finite time, a recv with neither time nor bytes, a compute op
  // without time, bytes on a compute op.
  static Result<Graph> build(std::vector<OpSpec> specs);

  std::size_t size() const { return ops_.size(); }
  const Op& op(OpId id) const { return ops_[id]; }
  bool is_recv(OpId id) const { return ops_[id].kind == OpKind::recv; }
  // Ops that list `id` as an input, ascending by OpId.
  std::span<const OpId> consumers(OpId id) const {
    return {consumer_ids_.data() + consumer_begin_[id], consumer_begin_[id + 1] - consumer_begin_[id]};
  }
  // Recv ops in file order; recv_index(op) is the position of a recv in this list, -1 otherwise.
  const std::vector<OpId>& recvs() const { return recvs_; }
  int recv_index(OpId id) const { return recv_index_[id]; }
  // A deterministic topological order (Kahn's algorithm, smallest OpId first among ready ops).
  const std::vector<OpId>& topo_order() const { return topo_; }
  std::optional<OpId> find(std::string_view name) const;

  // "op 'name' (line L, column C)" or "op 'name'" when the position is unknown.
  std::string describe(OpId id) const;

 private:
  std::vector<Op> ops_;
  std::vector<std::uint32_t> consumer_begin_;  // CSR offsets, size() + 1 entries
  std::vector<OpId> consumer_ids_;
  std::vector<OpId> recvs_;
  std::vector<int> recv_index_;
  std::vector<OpId> topo_;
  std::unordered_map<std::string_view, OpId> by_name_;  // views into ops_[i].name
};

// "op 'name' (line L, column C)" for an OpSpec, for loader errors.
std::string describe_spec(const OpSpec& spec);

}  // namespace tictac::priority
