#include "priority/policies/tac.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "priority/policies/tac_key.h"

namespace tictac::priority::policies {

namespace {

// One TAC run (docs/policies.md, "Incremental TAC"). Recvs are indexed like graph.recvs(); set
// ids come from DepSets (recv r's singleton {r} has id r).
//
// Per set S: count(S) and M(S), the number and total time of its outstanding members, and the
// XOR of their indices (which names the last one once count(S) is 1).
// Per recv r: P(r); its boundary B(r), the sets with count >= 2 reachable from {r} through sets
// whose only outstanding member is r; and M+(r) = min M over B(r) (M only grows along the set
// DAG, so no set beyond the boundary can be smaller). Each boundary set lists its subscribers.
// Recvs wait in buckets by primary key (group, M or P); the best bucket is resolved by
// (M+, name rank).
class IncrementalTac {
 public:
  IncrementalTac(DepSets deps, std::vector<std::int64_t> recv_ps, std::vector<std::int64_t> set_compute_ps,
                 std::vector<std::uint32_t> rank, TacStats* stats)
      : d_(std::move(deps)),
        t_(std::move(recv_ps)),
        compute_(std::move(set_compute_ps)),
        rank_(std::move(rank)),
        stats_(stats),
        count_(d_.size),
        m_(std::move(d_.weight)),
        xor_(std::move(d_.member_xor)),
        subscribers_(d_.num_sets()),
        stamp_(d_.num_sets(), 0),
        n_(d_.num_recvs),
        p_(n_),
        mplus_(n_, kInfinitePs),
        boundary_(n_),
        done_(n_, false),
        pos_(n_, 0),
        pending_(n_, false) {
    for (std::uint32_t r = 0; r < n_; ++r) {
      p_[r] = compute_[r];
      for (std::uint32_t s : d_.successors(r)) {  // all have count >= 2
        boundary_[r].push_back(s);
        subscribers_[s].push_back(r);
        mplus_[r] = std::min(mplus_[r], m_[s]);
      }
      bucket_insert(r);
    }
  }

  std::vector<std::int64_t> run() {
    std::vector<std::int64_t> priority(n_, -1);
    for (std::uint32_t round = 0; round < n_; ++round) {
      const std::uint32_t r = next();
      priority[r] = round;
      pick(r);
    }
    return priority;
  }

 private:
  TacPrimary primary(std::uint32_t r) const { return tac_primary(t_[r], p_[r]); }

  void bucket_insert(std::uint32_t r) {
    std::vector<std::uint32_t>& b = buckets_[primary(r)];
    pos_[r] = static_cast<std::uint32_t>(b.size());
    b.push_back(r);
  }
  void bucket_erase(std::uint32_t r) {
    auto it = buckets_.find(primary(r));
    std::vector<std::uint32_t>& b = it->second;
    const std::uint32_t last = b.back();
    b[pos_[r]] = last;
    pos_[last] = pos_[r];
    b.pop_back();
    if (b.empty()) buckets_.erase(it);
  }

  // The head of the normative order: the best bucket, then the smallest (M+, name rank).
  std::uint32_t next() {
    const std::vector<std::uint32_t>& b = buckets_.begin()->second;
    std::uint32_t best = b[0];
    if (b.size() > 1) {
      if (stats_) stats_->tie_candidates += b.size();
      for (std::uint32_t r : b) {
        if (mplus_[r] < mplus_[best] || (mplus_[r] == mplus_[best] && rank_[r] < rank_[best])) best = r;
      }
    }
    return best;
  }

  // Removes r from R: every set containing r (all descendants of {r}) loses it.
  void pick(std::uint32_t r) {
    bucket_erase(r);
    done_[r] = true;
    std::vector<std::uint32_t>().swap(boundary_[r]);
    ++now_;
    stack_.assign(1, r);
    stamp_[r] = now_;
    while (!stack_.empty()) {
      const std::uint32_t s = stack_.back();
      stack_.pop_back();
      if (stats_) ++stats_->pick_visits;
      --count_[s];
      m_[s] -= t_[r];
      xor_[s] ^= r;
      if (count_[s] >= 2) {
        // M(S) fell; its other members' boundaries are unchanged, so M+ = min(M+, M(S)).
        for (std::uint32_t w : subscribers_[s]) {
          if (!done_[w] && m_[s] < mplus_[w]) {
            mplus_[w] = m_[s];
            if (stats_) ++stats_->mplus_updates;
          }
        }
      } else {
        // count 1: S now waits on one recv q only; its compute time joins P(q) and S moves from
        // q's boundary into its region. count 0: S belonged to r alone. Either way no other
        // outstanding recv has S on its boundary.
        subscribers_[s].clear();
        subscribers_[s].shrink_to_fit();
        if (count_[s] == 1) {
          const std::uint32_t q = xor_[s];
          if (compute_[s] != 0) {
            bucket_erase(q);
            p_[q] += compute_[s];
            bucket_insert(q);
          }
          grown_sets_.push_back(s);
          if (!pending_[q]) {
            pending_[q] = true;
            grown_recvs_.push_back(q);
          }
        }
      }
      for (std::uint32_t next : d_.successors(s)) {
        if (stamp_[next] != now_) {
          stamp_[next] = now_;
          stack_.push_back(next);
        }
      }
    }
    // Counts are final now: grow the boundaries of the recvs whose boundary sets fell to 1.
    for (std::uint32_t q : grown_recvs_) grow_boundary(q);
    for (std::uint32_t q : grown_recvs_) pending_[q] = false;
    grown_recvs_.clear();
    grown_sets_.clear();
  }

  // Some of q's boundary sets now have count 1: drop them from B(q) and walk on from them
  // through further count-1 sets to the next sets with count >= 2. Every set joins a region at
  // most once, so this costs O(sets + edges) over the whole run, plus O(|B(q)|) per call.
  void grow_boundary(std::uint32_t q) {
    ++now_;
    std::vector<std::uint32_t>& b = boundary_[q];
    std::size_t kept = 0;
    for (std::uint32_t s : b) {
      if (count_[s] >= 2) {
        b[kept++] = s;
        stamp_[s] = now_;
      }
    }
    b.resize(kept);
    stack_.clear();
    for (std::uint32_t s : grown_sets_) {
      if (xor_[s] == q && count_[s] == 1 && stamp_[s] != now_) {
        stamp_[s] = now_;
        stack_.push_back(s);
      }
    }
    while (!stack_.empty()) {
      const std::uint32_t s = stack_.back();
      stack_.pop_back();
      if (stats_) ++stats_->boundary_visits;
      if (count_[s] >= 2) {
        b.push_back(s);
        subscribers_[s].push_back(q);
        continue;
      }
      for (std::uint32_t next : d_.successors(s)) {
        if (stamp_[next] != now_) {
          stamp_[next] = now_;
          stack_.push_back(next);
        }
      }
    }
    std::int64_t best = kInfinitePs;
    for (std::uint32_t s : b) best = std::min(best, m_[s]);
    mplus_[q] = best;
  }

  DepSets d_;
  std::vector<std::int64_t> t_;        // per recv: Time(r) = M(r)
  std::vector<std::int64_t> compute_;  // per set: total time of its compute ops
  std::vector<std::uint32_t> rank_;    // per recv: position in name order
  TacStats* stats_;
  std::vector<std::uint32_t> count_;   // per set: outstanding members
  std::vector<std::int64_t> m_;        // per set: their total time
  std::vector<std::uint32_t> xor_;     // per set: XOR of their indices
  std::vector<std::vector<std::uint32_t>> subscribers_;  // per set: recvs with it in B(r)
  std::vector<std::uint64_t> stamp_;   // per set: DFS marks
  std::uint64_t now_ = 0;
  std::vector<std::uint32_t> stack_;
  std::uint32_t n_;
  std::vector<std::int64_t> p_;
  std::vector<std::int64_t> mplus_;
  std::vector<std::vector<std::uint32_t>> boundary_;
  std::vector<bool> done_;
  std::vector<std::uint32_t> pos_;     // per recv: index in its bucket
  std::vector<bool> pending_;          // per recv: in grown_recvs_
  std::vector<std::uint32_t> grown_recvs_;
  std::vector<std::uint32_t> grown_sets_;
  std::map<TacPrimary, std::vector<std::uint32_t>> buckets_;
};

}  // namespace

Result<Schedule> tac_policy_with_stats(const Graph& graph, const PolicyOptions& options,
                                       std::uint64_t max_bitset_bytes, TacStats* stats) {
  Result<std::vector<std::int64_t>> times = op_times_ps(graph, options.bandwidth_bps);
  if (!times.ok()) return times.status();
  const std::vector<std::int64_t>& ps = *times;
  std::vector<std::int64_t> recv_ps(graph.recvs().size());
  for (std::size_t r = 0; r < recv_ps.size(); ++r) recv_ps[r] = ps[graph.recvs()[r]];
  Result<DepSets> deps = analyze_deps(graph, recv_ps, max_bitset_bytes);
  if (!deps.ok()) return deps.status().with_context("tac");
  std::vector<std::int64_t> set_compute(deps->num_sets(), 0);
  for (OpId id = 0; id < graph.size(); ++id) {
    const std::uint32_t s = deps->op_set[id];
    if (!graph.is_recv(id) && s != DepSets::kNone) set_compute[s] += ps[id];
  }
  if (stats) {
    *stats = TacStats{};
    stats->sets = deps->num_sets();
    stats->set_edges = deps->succ.size();
  }
  IncrementalTac tac(std::move(*deps), std::move(recv_ps), std::move(set_compute),
                     recv_name_ranks(graph), stats);
  return Schedule{"tac", tac.run()};
}

Result<Schedule> tac_policy(const Graph& graph, const PolicyOptions& options) {
  return tac_policy_with_stats(graph, options, kDefaultDepBitsetBytes, nullptr);
}

}  // namespace tictac::priority::policies
