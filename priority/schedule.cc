#include "priority/schedule.h"

#include <algorithm>
#include <array>
#include <numeric>

#include "priority/policies/baselines.h"
#include "priority/policies/optimal.h"
#include "priority/policies/tac.h"
#include "priority/policies/tic.h"

namespace tictac::priority {

std::vector<int> send_order(const Schedule& schedule) {
  std::vector<int> order(schedule.priority.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return schedule.priority[a] < schedule.priority[b]; });
  return order;
}

double op_time(const Graph& graph, OpId id, double bandwidth_bps) {
  const Op& op = graph.op(id);
  if (op.time.has_value()) return *op.time;
  if (op.kind == OpKind::recv && op.bytes.has_value()) {
    return static_cast<double>(*op.bytes) * 8.0 / bandwidth_bps;
  }
  return 0.0;  // unreachable for a built Graph: compute ops always have a time
}

namespace {

constexpr std::array<PolicyInfo, 6> kPolicies = {{
    {"random", policies::random_policy,
     "a seeded random permutation (--seed); the baseline graph frameworks behave like"},
    {"fifo", policies::fifo_policy, "recvs in file order"},
    {"layer", policies::layer_policy,
     "order of first use in a topological walk (ByteScheduler / P3 style layer index)"},
    {"tic", policies::tic_policy, "TicTac's timing-independent order (M+ with unit times); ties allowed"},
    {"tac", policies::tac_policy, "TicTac's timing-aware greedy order (incremental implementation)"},
    {"optimal", policies::optimal_policy,
     "exact minimum single-worker makespan by branch and bound (at most 12 recvs)"},
}};

}  // namespace

std::span<const PolicyInfo> all_policies() { return kPolicies; }

const PolicyInfo* find_policy(std::string_view name) {
  for (const PolicyInfo& p : kPolicies) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string policy_names() {
  std::string out;
  for (const PolicyInfo& p : kPolicies) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

}  // namespace tictac::priority
