// Shared dependency analysis for the policies (docs/policies.md, "Definitions").
//
// dep(recv) = {recv} (a recv's own inputs are not looked through); dep(compute op) = union of
// dep(inputs). Compute ops with the same dependency set form one *class*; analyze_deps finds
// the distinct sets, maps every op to its set, and builds the set DAG (an edge S -> T when an op
// of set S feeds an op of set T != S; then S is a proper subset of T, so every set containing a
// recv r is reachable from the singleton {r}).
//
// Times: policies that add times work in integer picoseconds (op_times_ps) so that every sum is
// exact and independent of summation order; the incremental and the reference TAC rely on that
// to agree bit for bit.
//
// Pure functions over an immutable Graph; thread-safe. Errors are Status values.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "common/status.h"
#include "priority/graph.h"

namespace tictac::priority::policies {

// Time(op) of every op (indexed by OpId) in picoseconds, rounded to nearest: compute ops their
// time, recvs their time if given else bytes*8/bandwidth. Errors (invalid_argument): a recv
// without 'time' while bandwidth is not a positive finite number; a time whose picosecond value,
// or the sum over the graph, does not fit in 62 bits (about 53 days).
Result<std::vector<std::int64_t>> op_times_ps(const Graph& graph, double bandwidth_bps);

struct DepSets {
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

  std::uint32_t num_recvs = 0;
  // Per OpId: the id of dep(op); kNone for a compute op that depends on no recv. A recv with
  // index i (position in graph.recvs()) maps to set i: sets 0..num_recvs-1 are the singletons.
  std::vector<std::uint32_t> op_set;
  // Per set: |S|, the XOR of its members' recv indices, and the sum of the weights given to
  // analyze_deps over its members (all zero when no weights were given).
  std::vector<std::uint32_t> size;
  std::vector<std::uint32_t> member_xor;
  std::vector<std::int64_t> weight;
  // Successors in the set DAG, CSR form; distinct and ascending per set.
  std::vector<std::uint32_t> succ_begin;
  std::vector<std::uint32_t> succ;

  std::size_t num_sets() const { return size.size(); }
  std::span<const std::uint32_t> successors(std::uint32_t set) const {
    return {succ.data() + succ_begin[set], succ_begin[set + 1] - succ_begin[set]};
  }
};

// Position of every recv (indexed like graph.recvs()) in byte-wise ascending name order.
std::vector<std::uint32_t> recv_name_ranks(const Graph& graph);

// Default cap on the temporary bitsets (one bit per recv per distinct set) analyze_deps keeps.
inline constexpr std::uint64_t kDefaultDepBitsetBytes = std::uint64_t{4} << 30;

// Builds the classes in one topological pass. recv_weight is empty or indexed like
// graph.recvs(). Cost O(V + E + J * recvs / 64) time for J multi-set joins, and
// O(sets * recvs / 8) temporary bytes; when that would exceed max_bitset_bytes the result is
// resource_exhausted naming the numbers and suggesting fifo or layer, which need no
// dependency analysis.
Result<DepSets> analyze_deps(const Graph& graph, std::span<const std::int64_t> recv_weight = {},
                             std::uint64_t max_bitset_bytes = kDefaultDepBitsetBytes);

}  // namespace tictac::priority::policies
