#include "priority/policies/optimal.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_set>
#include <vector>

#include "priority/policies/deps.h"
#include "priority/policies/makespan.h"
#include "priority/policies/tac.h"

namespace tictac::priority::policies {

namespace {

class Search {
 public:
  Search(const Graph& graph, std::vector<std::int64_t> ps) : g_(graph), ps_(std::move(ps)) {
    n_ = static_cast<int>(g_.recvs().size());
    // after_[c]: the longest chain of compute work that must follow compute op c.
    after_.assign(g_.size(), 0);
    const std::vector<OpId>& topo = g_.topo_order();
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      for (OpId c : g_.consumers(*it)) {
        if (!g_.is_recv(c)) after_[*it] = std::max(after_[*it], ps_[c] + after_[c]);
      }
    }
    t_.resize(n_);
    twin_.assign(n_, -1);
    for (int r = 0; r < n_; ++r) {
      t_[r] = ps_[g_.recvs()[r]];
      for (int q = r - 1; q >= 0 && twin_[r] < 0; --q) {
        const auto a = g_.consumers(g_.recvs()[q]), b = g_.consumers(g_.recvs()[r]);
        if (t_[q] == t_[r] && std::equal(a.begin(), a.end(), b.begin(), b.end())) twin_[r] = q;
      }
    }
    // desc_[r]: the compute ops that depend on recv r (through compute ops only); work_[r]:
    // their total time, all of which the device must run after r arrives.
    desc_.resize(n_);
    work_.assign(n_, 0);
    std::vector<bool> mark(g_.size());
    for (int r = 0; r < n_; ++r) {
      std::fill(mark.begin(), mark.end(), false);
      std::vector<OpId> stack = {g_.recvs()[r]};
      while (!stack.empty()) {
        const OpId id = stack.back();
        stack.pop_back();
        for (OpId c : g_.consumers(id)) {
          if (g_.is_recv(c) || mark[c]) continue;
          mark[c] = true;
          desc_[r].push_back(c);
          work_[r] += ps_[c];
          stack.push_back(c);
        }
      }
    }
    by_tail_.resize(n_);
    std::iota(by_tail_.begin(), by_tail_.end(), 0);
    std::stable_sort(by_tail_.begin(), by_tail_.end(), [&](int a, int b) { return work_[a] > work_[b]; });
    head_.assign(g_.size(), 0);
    finish_.assign(n_, 0);
    placed_.assign(n_, false);
  }

  void run(std::int64_t upper_bound, OptimalStats* stats) {
    best_ = upper_bound;
    stats_ = stats;
    order_.clear();
    descend(0);
  }
  const std::vector<int>& best_order() const { return best_order_; }
  std::int64_t best() const { return best_; }

 private:
  void descend(std::int64_t channel) {
    if (stats_) ++stats_->nodes;
    if (static_cast<int>(order_.size()) == n_) {
      if (stats_) ++stats_->leaves;
      const std::int64_t ms = single_worker_makespan_ps(g_, order_, ps_);
      if (ms < best_) {
        best_ = ms;
        best_order_ = order_;
      }
      return;
    }
    if (!order_.empty()) {
      std::int64_t first_arrival = INT64_MAX;
      for (int r = 0; r < n_; ++r) {
        if (!placed_[r]) first_arrival = std::min(first_arrival, channel + t_[r]);
      }
      // The device's decisions before the first remaining recv can arrive are the ones the
      // full run takes: replay them exactly.
      const PrefixRun run = run_prefix_ps(g_, order_, ps_, first_arrival);
      if (seen_before(run)) return;
      if (lower_bound(channel, run) >= best_) return;
    }
    for (int r = 0; r < n_; ++r) {
      if (placed_[r] || (twin_[r] >= 0 && !placed_[twin_[r]])) continue;
      placed_[r] = true;
      finish_[r] = channel + t_[r];
      order_.push_back(r);
      descend(channel + t_[r]);
      order_.pop_back();
      placed_[r] = false;
    }
  }

  // A makespan no completion of the current prefix can beat. Recvs not yet placed arrive no
  // earlier than channel + their own time.
  std::int64_t lower_bound(std::int64_t channel, const PrefixRun& run) {
    std::int64_t lb = 0;
    // (1) After recv r arrives the device still has to run every compute op that depends on r
    // and has not started. For the remaining recvs that is all of work_[r], and Jackson's rule
    // (largest tail first) minimises max(arrival + tail) over their orders.
    std::int64_t at = channel;
    for (int r : by_tail_) {
      if (placed_[r]) {
        std::int64_t left = 0;
        for (OpId c : desc_[r]) left += run.finish[c] < 0 ? ps_[c] : 0;
        if (left > 0) lb = std::max(lb, std::max(finish_[r], run.device_free) + left);
      } else {
        at += t_[r];
        lb = std::max(lb, at + work_[r]);
      }
    }
    // (2) The ops the replay started finish when it says.
    // (3) Every op not started by then: earliest start (head) from its inputs, and not before
    // the device is free; it is followed by the chain after it.
    not_started_.clear();
    for (OpId id : g_.topo_order()) {
      if (g_.is_recv(id)) {
        const int r = g_.recv_index(id);
        head_[id] = placed_[r] ? finish_[r] : channel + t_[r];
        continue;
      }
      if (run.finish[id] >= 0) {
        head_[id] = run.finish[id];  // for compute ops: the finish time
        lb = std::max(lb, run.finish[id] + after_[id]);
        continue;
      }
      std::int64_t h = run.device_free;
      for (OpId in : g_.op(id).inputs) {
        h = std::max(h, g_.is_recv(in) || run.finish[in] >= 0 ? head_[in] : head_[in] + ps_[in]);
      }
      head_[id] = h;
      lb = std::max(lb, h + ps_[id] + after_[id]);
      not_started_.push_back(id);
    }
    // (4) The device runs the not-started ops one at a time: for the ops with head >= h, h + their
    // total time + the shortest chain after any of them.
    std::sort(not_started_.begin(), not_started_.end(),
              [&](OpId a, OpId b) { return head_[a] < head_[b]; });
    std::int64_t work = 0, tail = kNoTail;
    for (auto it = not_started_.rbegin(); it != not_started_.rend(); ++it) {
      work += ps_[*it];
      tail = std::min(tail, after_[*it]);
      lb = std::max(lb, head_[*it] + work + tail);
    }
    return lb;
  }

  // Two prefixes of the same recvs whose replays leave the same state (device free time, ops
  // started and their end times, queued ops and their ready times) have the same completions
  // with the same makespans. The first one met is the lexicographically smaller and has been
  // searched, so the second can be skipped. Recv arrival times are not part of the state: a
  // consumer that is not ready yet waits for an input that finishes after every placed recv.
  // Exact keys, up to a memory budget; past it nothing more is remembered (slower, still exact).
  bool seen_before(const PrefixRun& run) {
    std::string key;
    auto put = [&key](std::int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    std::int64_t mask = 0;
    for (int r = 0; r < n_; ++r) mask |= placed_[r] ? std::int64_t{1} << r : 0;
    put(mask);
    put(run.device_free);
    for (OpId id = 0; id < g_.size(); ++id) {
      if (g_.is_recv(id)) continue;
      if (run.finish[id] >= 0) {
        put(id);
        put(run.finish[id]);
      } else if (run.ready[id] >= 0) {
        put(-1 - static_cast<std::int64_t>(id));
        put(run.ready[id]);
      }
    }
    if (seen_.count(key) != 0) return true;
    if (seen_bytes_ + key.size() + kEntryOverhead <= kSeenBudgetBytes) {
      seen_bytes_ += key.size() + kEntryOverhead;
      seen_.insert(std::move(key));
    }
    return false;
  }

  static constexpr std::size_t kEntryOverhead = 64;
  static constexpr std::size_t kSeenBudgetBytes = std::size_t{256} << 20;
  std::unordered_set<std::string> seen_;
  std::size_t seen_bytes_ = 0;
  static constexpr std::int64_t kNoTail = INT64_MAX;
  const Graph& g_;
  std::vector<std::int64_t> ps_;
  int n_ = 0;
  std::vector<std::int64_t> after_;
  std::vector<OpId> not_started_;
  std::vector<std::int64_t> t_;
  std::vector<int> twin_;  // a lower-indexed interchangeable recv, or -1
  std::vector<std::vector<OpId>> desc_;
  std::vector<std::int64_t> work_;
  std::vector<int> by_tail_;  // recvs by work_ descending
  std::vector<std::int64_t> head_;
  std::vector<std::int64_t> finish_;
  std::vector<bool> placed_;
  std::vector<int> order_;
  std::vector<int> best_order_;
  std::int64_t best_ = 0;
  OptimalStats* stats_ = nullptr;
};

}  // namespace

Result<Schedule> optimal_policy_with_stats(const Graph& graph, const PolicyOptions& options,
                                           OptimalStats* stats) {
  const std::size_t n = graph.recvs().size();
  if (n > static_cast<std::size_t>(kOptimalMaxRecvs)) {
    return invalid_argument("optimal is exact and limited to 12 recvs; this graph has " +
                            std::to_string(n) + "; use tac");
  }
  Result<std::vector<std::int64_t>> ps = op_times_ps(graph, options.bandwidth_bps);
  if (!ps.ok()) return ps.status();
  if (stats) *stats = OptimalStats{};
  // Start from TAC's makespan (+1 so that an optimal TAC order is still found and the
  // lexicographically smallest optimal order wins).
  Result<Schedule> tac = tac_policy(graph, options);
  if (!tac.ok()) return tac.status();
  const std::vector<int> tac_order = send_order(*tac);
  const std::int64_t tac_ms = single_worker_makespan_ps(graph, tac_order, *ps);
  Search search(graph, std::move(ps).value());
  search.run(tac_ms + 1, stats);
  if (stats) stats->makespan_ps = search.best();
  Schedule schedule{"optimal", std::vector<std::int64_t>(n)};
  const std::vector<int>& best = search.best_order();
  for (std::size_t i = 0; i < best.size(); ++i) schedule.priority[best[i]] = static_cast<std::int64_t>(i);
  return schedule;
}

Result<Schedule> optimal_policy(const Graph& graph, const PolicyOptions& options) {
  return optimal_policy_with_stats(graph, options, nullptr);
}

}  // namespace tictac::priority::policies
