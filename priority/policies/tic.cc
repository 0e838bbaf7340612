#include "priority/policies/tic.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "priority/policies/deps.h"

namespace tictac::priority::policies {

Result<std::vector<std::int64_t>> tic_mplus(const Graph& graph) {
  Result<DepSets> deps = analyze_deps(graph);
  if (!deps.ok()) return deps.status();
  // Every set containing r other than {r} is a superset of a direct successor of {r}, and with
  // unit times M(S) = |S| grows along the set DAG, so the minimum is over direct successors.
  std::vector<std::int64_t> mplus(deps->num_recvs, std::numeric_limits<std::int64_t>::max());
  for (std::uint32_t r = 0; r < deps->num_recvs; ++r) {
    for (std::uint32_t s : deps->successors(r)) {
      mplus[r] = std::min<std::int64_t>(mplus[r], deps->size[s]);
    }
  }
  return mplus;
}

Result<Schedule> tic_policy(const Graph& graph, const PolicyOptions& options) {
  (void)options;  // timing-independent by definition
  Result<std::vector<std::int64_t>> mplus = tic_mplus(graph);
  if (!mplus.ok()) return mplus.status();
  const std::vector<std::int64_t>& m = *mplus;
  std::vector<int> order(m.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return m[a] < m[b]; });
  Schedule schedule{"tic", std::vector<std::int64_t>(m.size())};
  for (std::size_t i = 0; i < order.size(); ++i) {
    const bool tied = i > 0 && m[order[i]] == m[order[i - 1]];
    schedule.priority[order[i]] = tied ? schedule.priority[order[i - 1]] : static_cast<std::int64_t>(i);
  }
  return schedule;
}

}  // namespace tictac::priority::policies
