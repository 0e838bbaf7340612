#include "priority/policies/tac_reference.h"

#include <algorithm>
#include <iterator>

#include "priority/policies/deps.h"
#include "priority/policies/tac_key.h"

namespace tictac::priority::policies {

Result<Schedule> tac_reference_policy(const Graph& graph, const PolicyOptions& options) {
  Result<std::vector<std::int64_t>> times = op_times_ps(graph, options.bandwidth_bps);
  if (!times.ok()) return times.status();
  const std::vector<std::int64_t>& ps = *times;
  const std::size_t n = graph.recvs().size();

  // dep(op) as sorted recv indices, in topological order.
  std::vector<std::vector<std::uint32_t>> dep(graph.size());
  for (OpId id : graph.topo_order()) {
    if (graph.is_recv(id)) {
      dep[id] = {static_cast<std::uint32_t>(graph.recv_index(id))};
      continue;
    }
    for (OpId in : graph.op(id).inputs) {
      std::vector<std::uint32_t> merged;
      std::set_union(dep[id].begin(), dep[id].end(), dep[in].begin(), dep[in].end(),
                     std::back_inserter(merged));
      dep[id].swap(merged);
    }
  }
  std::vector<std::int64_t> recv_ps(n);
  for (std::size_t r = 0; r < n; ++r) recv_ps[r] = ps[graph.recvs()[r]];
  const std::vector<std::uint32_t> rank = recv_name_ranks(graph);

  Schedule schedule{"tac", std::vector<std::int64_t>(n, -1)};
  std::vector<bool> outstanding(n, true);
  std::vector<std::int64_t> p(n), mplus(n);
  for (std::size_t round = 0; round < n; ++round) {
    std::fill(p.begin(), p.end(), 0);
    std::fill(mplus.begin(), mplus.end(), kInfinitePs);
    for (OpId id = 0; id < graph.size(); ++id) {
      if (graph.is_recv(id)) continue;
      std::int64_t m = 0;
      std::size_t count = 0;
      std::uint32_t only = 0;
      for (std::uint32_t r : dep[id]) {
        if (!outstanding[r]) continue;
        m += recv_ps[r];
        ++count;
        only = r;
      }
      if (count == 1) p[only] += ps[id];
      if (count > 1) {
        for (std::uint32_t r : dep[id]) {
          if (outstanding[r]) mplus[r] = std::min(mplus[r], m);
        }
      }
    }
    std::size_t best = n;
    TacKey best_key;
    for (std::size_t r = 0; r < n; ++r) {
      if (!outstanding[r]) continue;
      const TacKey key{tac_primary(recv_ps[r], p[r]), mplus[r], rank[r]};
      if (best == n || key < best_key) {
        best = r;
        best_key = key;
      }
    }
    schedule.priority[best] = static_cast<std::int64_t>(round);
    outstanding[best] = false;
  }
  return schedule;
}

}  // namespace tictac::priority::policies
