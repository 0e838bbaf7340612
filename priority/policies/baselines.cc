#include "priority/policies/baselines.h"

#include <limits>
#include <numeric>
#include <random>

namespace tictac::priority::policies {

namespace {

// Uniform integer in [0, bound) by rejection, so every value is equally likely.
std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound) {
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t limit = max - (max % bound + 1) % bound;  // largest multiple of bound, minus 1
  for (;;) {
    const std::uint64_t x = engine();
    if (x <= limit) return x % bound;
  }
}

}  // namespace

std::vector<int> seeded_permutation(int n, std::uint64_t seed) {
  std::vector<int> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 engine(seed);
  for (int i = n - 1; i > 0; --i) {
    const auto j = static_cast<int>(uniform_below(engine, static_cast<std::uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

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
