#include "priority/policies/makespan.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "common/check.h"
#include "priority/schedule.h"

namespace tictac::priority::policies {

namespace {

void check_order(const Graph& graph, std::span<const int> order, bool complete) {
  const std::vector<OpId>& recvs = graph.recvs();
  TICTAC_CHECK(complete ? order.size() == recvs.size() : order.size() <= recvs.size(),
               "recv order has " << order.size() << " entries for " << recvs.size() << " recvs");
  std::vector<bool> seen(recvs.size(), false);
  for (int r : order) {
    TICTAC_CHECK(r >= 0 && static_cast<std::size_t>(r) < recvs.size() && !seen[r],
                 "recv order is not a permutation (entry " << r << ")");
    seen[r] = true;
  }
}

// The model itself. Delivers the recvs of `order` back to back; runs the device until nothing
// is left, or until its next decision would be at or after `horizon`. Calls finish(id, at) for
// every op that finishes (compute ops when they start, with their end time) and on_left(id,
// ready_at) for the ops still queued at the stop. Returns when the device is next free.
template <typename T, typename TimeOf, typename OnFinish, typename OnLeft>
T simulate(const Graph& graph, std::span<const int> order, TimeOf time_of, T horizon,
           OnFinish on_finish, OnLeft on_left) {
  const std::vector<OpId>& recvs = graph.recvs();
  using Ready = std::pair<T, OpId>;  // (time it became ready, id)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  std::vector<std::uint32_t> missing(graph.size(), 0);
  for (OpId id = 0; id < graph.size(); ++id) {
    if (graph.is_recv(id)) continue;
    missing[id] = static_cast<std::uint32_t>(graph.op(id).inputs.size());
    if (missing[id] == 0) ready.push({T{0}, id});
  }
  auto finish = [&](OpId id, T at) {
    on_finish(id, at);
    for (OpId c : graph.consumers(id)) {
      if (!graph.is_recv(c) && --missing[c] == 0) ready.push({at, c});
    }
  };
  T channel{0};  // when the channel finishes the recvs sent so far
  T device{0};   // when the device is next free
  std::size_t next = 0;
  for (;;) {
    // Deliver every recv that has arrived by the time the device is free.
    while (next < order.size() && channel + time_of(recvs[order[next]]) <= device) {
      channel += time_of(recvs[order[next]]);
      finish(recvs[order[next++]], channel);
    }
    if (ready.empty()) {
      if (next == order.size()) break;
      channel += time_of(recvs[order[next]]);
      device = std::max(device, channel);
      finish(recvs[order[next++]], channel);
      continue;
    }
    // Every queued op became ready by `device`, so the decision is taken at `device`.
    if (!(device < horizon)) break;
    const auto [at, id] = ready.top();
    ready.pop();
    device = std::max(device, at) + time_of(id);
    finish(id, device);
  }
  for (; !ready.empty(); ready.pop()) on_left(ready.top().second, ready.top().first);
  return device;
}

}  // namespace

double single_worker_makespan(const Graph& graph, const std::vector<int>& recv_order,
                              double bandwidth_bps) {
  check_order(graph, recv_order, true);
  double makespan = 0;
  simulate<double>(
      graph, recv_order, [&](OpId id) { return op_time(graph, id, bandwidth_bps); },
      std::numeric_limits<double>::infinity(), [&](OpId, double at) { makespan = std::max(makespan, at); },
      [](OpId, double) {});
  return makespan;
}

std::int64_t single_worker_makespan_ps(const Graph& graph, std::span<const int> recv_order,
                                       std::span<const std::int64_t> op_ps) {
  TICTAC_CHECK(op_ps.size() == graph.size(), "op_ps has " << op_ps.size() << " entries for "
                                                          << graph.size() << " ops");
  check_order(graph, recv_order, true);
  std::int64_t makespan = 0;
  simulate<std::int64_t>(
      graph, recv_order, [&](OpId id) { return op_ps[id]; }, std::numeric_limits<std::int64_t>::max(),
      [&](OpId, std::int64_t at) { makespan = std::max(makespan, at); }, [](OpId, std::int64_t) {});
  return makespan;
}

PrefixRun run_prefix_ps(const Graph& graph, std::span<const int> prefix,
                        std::span<const std::int64_t> op_ps, std::int64_t horizon) {
  TICTAC_CHECK(op_ps.size() == graph.size(), "op_ps has " << op_ps.size() << " entries for "
                                                          << graph.size() << " ops");
  check_order(graph, prefix, false);
  PrefixRun run;
  run.finish.assign(graph.size(), -1);
  run.ready.assign(graph.size(), -1);
  run.device_free = simulate<std::int64_t>(
      graph, prefix, [&](OpId id) { return op_ps[id]; }, horizon,
      [&](OpId id, std::int64_t at) { run.finish[id] = at; },
      [&](OpId id, std::int64_t at) { run.ready[id] = at; });
  return run;
}

}  // namespace tictac::priority::policies
