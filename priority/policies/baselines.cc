#include "priority/policies/baselines.h"

#include <numeric>

#include "common/random.h"

namespace tictac::priority::policies {

std::vector<int> seeded_permutation(int n, std::uint64_t seed) { return Rng(seed).permutation(n); }

Result<Schedule> random_policy(const Graph& graph, const PolicyOptions& options) {
  const int n = static_cast<int>(graph.recvs().size());
  const std::vector<int> perm = seeded_permutation(n, options.seed);
  Schedule schedule{"random", std::vector<std::int64_t>(n)};
  for (int i = 0; i < n; ++i) schedule.priority[perm[i]] = i;
  return schedule;
}

Result<Schedule> fifo_policy(const Graph& graph, const PolicyOptions& options) {
  (void)options;
  Schedule schedule{"fifo", std::vector<std::int64_t>(graph.recvs().size())};
  std::iota(schedule.priority.begin(), schedule.priority.end(), 0);
  return schedule;
}

Result<Schedule> layer_policy(const Graph& graph, const PolicyOptions& options) {
  (void)options;
  Schedule schedule{"layer", std::vector<std::int64_t>(graph.recvs().size(), -1)};
  std::int64_t rank = 0;
  for (OpId id : graph.topo_order()) {
    if (graph.is_recv(id)) continue;
    for (OpId in : graph.op(id).inputs) {
      const int r = graph.recv_index(in);
      if (r >= 0 && schedule.priority[r] < 0) schedule.priority[r] = rank;
    }
    ++rank;
  }
  for (std::int64_t& p : schedule.priority) {
    if (p < 0) p = rank;
  }
  return schedule;
}

}  // namespace tictac::priority::policies
