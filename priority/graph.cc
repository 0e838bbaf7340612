#include "priority/graph.h"

#include <algorithm>
#include <cmath>
#include <queue>

namespace tictac::priority {
namespace {

std::string describe_at(std::string_view name, SourcePos pos) {
  std::string out = "op '" + std::string(name) + "'";
  if (pos.line > 0) {
    out += " (line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ")";
  }
  return out;
}

Status validate_values(const OpSpec& s) {
  if (s.time.has_value() && (!std::isfinite(*s.time) || *s.time < 0)) {
    return invalid_argument(describe_spec(s) + ": time must be a finite number of seconds >= 0");
  }
  if (s.kind == OpKind::recv) {
    if (!s.time.has_value() && !s.bytes.has_value()) {
      return invalid_argument(describe_spec(s) + ": a recv needs 'bytes' or 'time' (or both)");
    }
  } else {
    if (!s.time.has_value()) {
      return invalid_argument(describe_spec(s) + ": a compute op needs 'time' (seconds)");
    }
    if (s.bytes.has_value()) {
      return invalid_argument(describe_spec(s) +
                              ": 'bytes' is only meaningful on a recv; use kind \"recv\"");
    }
  }
  return Status::Ok();
}

}  // namespace

std::string_view to_string(OpKind kind) { return kind == OpKind::recv ? "recv" : "compute"; }

std::string describe_spec(const OpSpec& spec) { return describe_at(spec.name, spec.pos); }

std::string Graph::describe(OpId id) const { return describe_at(ops_[id].name, ops_[id].pos); }

std::optional<OpId> Graph::find(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

Result<Graph> Graph::build(std::vector<OpSpec> specs) {
  if (specs.size() >= static_cast<std::size_t>(UINT32_MAX)) {
    return invalid_argument("graph has too many ops (limit 4294967294)");
  }
  Graph g;
  const std::size_t n = specs.size();
  g.ops_.resize(n);
  g.by_name_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    OpSpec& s = specs[i];
    if (s.name.empty()) {
      std::string where = "op #" + std::to_string(i);
      if (s.pos.line > 0) {
        where += " (line " + std::to_string(s.pos.line) + ", column " + std::to_string(s.pos.column) + ")";
      }
      return invalid_argument(where + ": 'name' must be a non-empty string");
    }
    TICTAC_RETURN_IF_ERROR(validate_values(s));
    Op& op = g.ops_[i];
    op.name = std::move(s.name);
    op.kind = s.kind;
    op.time = s.time;
    op.bytes = s.bytes;
    op.pos = s.pos;
    s.name = op.name;  // keep the spec usable for error messages below
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto [it, inserted] = g.by_name_.emplace(std::string_view(g.ops_[i].name), static_cast<OpId>(i));
    if (!inserted) {
      return invalid_argument(g.describe(static_cast<OpId>(i)) + ": duplicate name; first defined as " +
                              g.describe(it->second));
    }
  }
  // Resolve inputs.
  std::vector<std::uint32_t> in_count(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    Op& op = g.ops_[i];
    op.inputs.reserve(specs[i].inputs.size());
    for (const std::string& in : specs[i].inputs) {
      auto it = g.by_name_.find(in);
      if (it == g.by_name_.end()) {
        return invalid_argument(g.describe(static_cast<OpId>(i)) + ": unknown input '" + in + "'");
      }
      if (it->second == i) {
        return invalid_argument(g.describe(static_cast<OpId>(i)) + ": lists itself as an input");
      }
      if (std::find(op.inputs.begin(), op.inputs.end(), it->second) == op.inputs.end()) {
        op.inputs.push_back(it->second);
        ++in_count[it->second + 1];
      }
    }
  }
  // Consumers in CSR form (ascending OpId because we scan consumers in order).
  g.consumer_begin_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) g.consumer_begin_[i + 1] = g.consumer_begin_[i] + in_count[i + 1];
  g.consumer_ids_.resize(g.consumer_begin_[n]);
  std::vector<std::uint32_t> fill(g.consumer_begin_.begin(), g.consumer_begin_.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    for (OpId in : g.ops_[i].inputs) g.consumer_ids_[fill[in]++] = static_cast<OpId>(i);
  }
  // Topological order; Kahn with a min-heap gives a deterministic order.
  std::vector<std::uint32_t> pending(n);
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    pending[i] = static_cast<std::uint32_t>(g.ops_[i].inputs.size());
    if (pending[i] == 0) ready.push(static_cast<OpId>(i));
  }
  g.topo_.reserve(n);
  while (!ready.empty()) {
    const OpId id = ready.top();
    ready.pop();
    g.topo_.push_back(id);
    for (OpId c : g.consumers(id)) {
      if (--pending[c] == 0) ready.push(c);
    }
  }
  if (g.topo_.size() != n) {
    // Walk back along unfinished inputs from an unfinished op until a node repeats.
    OpId start = 0;
    while (pending[start] == 0) ++start;
    std::vector<int> seen_at(n, -1);
    std::vector<OpId> path;
    OpId cur = start;
    while (seen_at[cur] < 0) {
      seen_at[cur] = static_cast<int>(path.size());
      path.push_back(cur);
      for (OpId in : g.ops_[cur].inputs) {
        if (pending[in] != 0) {
          cur = in;
          break;
        }
      }
    }
    std::string cycle;
    for (std::size_t k = path.size(); k-- > static_cast<std::size_t>(seen_at[cur]);) {
      cycle += "'" + g.ops_[path[k]].name + "' -> ";
    }
    cycle += "'" + g.ops_[path.back()].name + "'";
    return invalid_argument(g.describe(cur) + ": is on a cycle: " + cycle);
  }
  g.recv_index_.assign(n, -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (g.ops_[i].kind == OpKind::recv) {
      g.recv_index_[i] = static_cast<int>(g.recvs_.size());
      g.recvs_.push_back(static_cast<OpId>(i));
    }
  }
  return g;
}

}  // namespace tictac::priority
