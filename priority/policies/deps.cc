#include "priority/policies/deps.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "priority/schedule.h"

namespace tictac::priority::policies {

Result<std::vector<std::int64_t>> op_times_ps(const Graph& graph, double bandwidth_bps) {
  constexpr double kLimit = 4.0e18;  // < 2^62 picoseconds
  const bool bandwidth_ok = std::isfinite(bandwidth_bps) && bandwidth_bps > 0;
  std::vector<std::int64_t> ps(graph.size());
  std::int64_t total = 0;
  for (OpId id = 0; id < graph.size(); ++id) {
    const Op& op = graph.op(id);
    if (op.kind == OpKind::recv && !op.time.has_value() && !bandwidth_ok) {
      return invalid_argument(graph.describe(id) +
                              ": recv has no 'time', so its time is bytes*8/bandwidth, but the "
                              "bandwidth is " + std::to_string(bandwidth_bps) +
                              "; give a positive bandwidth in bits per second");
    }
    const double seconds_ps = op_time(graph, id, bandwidth_bps) * 1e12;
    if (!(seconds_ps <= kLimit)) {
      return invalid_argument(graph.describe(id) + ": time " + std::to_string(seconds_ps / 1e12) +
                              " s is too large (limit 4e6 s); check the time unit (seconds) or "
                              "the bandwidth (bits per second)");
    }
    ps[id] = std::llround(seconds_ps);
    total += ps[id];
    if (total > static_cast<std::int64_t>(kLimit)) {
      return invalid_argument("the graph's total op time exceeds 4e6 s at " + graph.describe(id) +
                              "; check the time unit (seconds) or the bandwidth (bits per second)");
    }
  }
  return ps;
}

std::vector<std::uint32_t> recv_name_ranks(const Graph& graph) {
  const std::vector<OpId>& recvs = graph.recvs();
  std::vector<std::uint32_t> by_name(recvs.size());
  for (std::uint32_t i = 0; i < by_name.size(); ++i) by_name[i] = i;
  std::sort(by_name.begin(), by_name.end(), [&](std::uint32_t a, std::uint32_t b) {
    return graph.op(recvs[a]).name < graph.op(recvs[b]).name;  // char_traits: unsigned bytes
  });
  std::vector<std::uint32_t> rank(recvs.size());
  for (std::uint32_t i = 0; i < by_name.size(); ++i) rank[by_name[i]] = i;
  return rank;
}

namespace {

// Bitsets of the non-singleton sets, allocated in chunks so that growth never copies.
class BitsetArena {
 public:
  explicit BitsetArena(std::size_t words) : words_(std::max<std::size_t>(words, 1)) {}
  std::size_t words() const { return words_; }
  std::uint64_t bytes_for(std::size_t count) const { return count * words_ * 8; }
  std::uint64_t* at(std::size_t index) {
    return chunks_[index / kChunk].get() + (index % kChunk) * words_;
  }
  std::size_t add(const std::uint64_t* bits) {
    const std::size_t index = count_++;
    if (index / kChunk == chunks_.size()) {
      chunks_.push_back(std::make_unique<std::uint64_t[]>(kChunk * words_));
    }
    std::memcpy(at(index), bits, words_ * 8);
    return index;
  }
  std::size_t count() const { return count_; }

 private:
  static constexpr std::size_t kChunk = 256;
  std::size_t words_;
  std::size_t count_ = 0;
  std::vector<std::unique_ptr<std::uint64_t[]>> chunks_;
};

std::uint64_t hash_words(const std::uint64_t* w, std::size_t n) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= w[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xbf58476d1ce4e5b9ull;
  }
  return h ^ (h >> 31);
}

class Builder {
 public:
  Builder(const Graph& graph, std::span<const std::int64_t> weight, std::uint64_t max_bytes)
      : graph_(graph),
        weight_(weight),
        max_bytes_(max_bytes),
        n_(static_cast<std::uint32_t>(graph.recvs().size())),
        arena_((n_ + 63) / 64),
        scratch_(arena_.words()) {}

  Result<DepSets> run() {
    out_.num_recvs = n_;
    out_.op_set.assign(graph_.size(), DepSets::kNone);
    for (std::uint32_t r = 0; r < n_; ++r) {
      out_.size.push_back(1);
      out_.member_xor.push_back(r);
      out_.weight.push_back(weight_.empty() ? 0 : weight_[r]);
      bits_index_.push_back(kNoBits);
      out_.op_set[graph_.recvs()[r]] = r;
    }
    std::vector<std::uint32_t> in_sets;
    for (OpId id : graph_.topo_order()) {
      if (graph_.is_recv(id)) continue;
      in_sets.clear();
      for (OpId in : graph_.op(id).inputs) {
        const std::uint32_t s = out_.op_set[in];
        if (s != DepSets::kNone && std::find(in_sets.begin(), in_sets.end(), s) == in_sets.end()) {
          in_sets.push_back(s);
        }
      }
      std::uint32_t set = DepSets::kNone;
      if (in_sets.size() == 1) {
        set = in_sets[0];
      } else if (in_sets.size() > 1) {
        Result<std::uint32_t> joined = join(in_sets);
        if (!joined.ok()) return joined.status();
        set = *joined;
      }
      out_.op_set[id] = set;
      if (set == DepSets::kNone) continue;
      for (std::uint32_t s : in_sets) {
        if (s != set) edges_.push_back((std::uint64_t{s} << 32) | set);
      }
    }
    std::sort(edges_.begin(), edges_.end());
    edges_.erase(std::unique(edges_.begin(), edges_.end()), edges_.end());
    out_.succ_begin.assign(out_.num_sets() + 1, 0);
    out_.succ.reserve(edges_.size());
    for (std::uint64_t e : edges_) {
      ++out_.succ_begin[(e >> 32) + 1];
      out_.succ.push_back(static_cast<std::uint32_t>(e));
    }
    for (std::size_t s = 0; s < out_.num_sets(); ++s) out_.succ_begin[s + 1] += out_.succ_begin[s];
    return std::move(out_);
  }

 private:
  static constexpr std::size_t kNoBits = static_cast<std::size_t>(-1);

  bool contains(std::uint32_t set, std::uint32_t recv) {
    if (set < n_) return set == recv;
    return (arena_.at(bits_index_[set])[recv / 64] >> (recv % 64)) & 1u;
  }

  // Adds the members of `set` to scratch_, accumulating the new members' count, xor, weight.
  void merge_into_scratch(std::uint32_t set, std::uint32_t& added, std::uint32_t& x, std::int64_t& w) {
    auto add_bit = [&](std::uint32_t r) {
      ++added;
      x ^= r;
      if (!weight_.empty()) w += weight_[r];
    };
    if (set < n_) {
      std::uint64_t& word = scratch_[set / 64];
      const std::uint64_t bit = std::uint64_t{1} << (set % 64);
      if (!(word & bit)) {
        word |= bit;
        add_bit(set);
      }
      return;
    }
    const std::uint64_t* bits = arena_.at(bits_index_[set]);
    for (std::size_t i = 0; i < arena_.words(); ++i) {
      std::uint64_t fresh = bits[i] & ~scratch_[i];
      if (fresh == 0) continue;
      scratch_[i] |= fresh;
      while (fresh != 0) {
        add_bit(static_cast<std::uint32_t>(i * 64 + std::countr_zero(fresh)));
        fresh &= fresh - 1;
      }
    }
  }

  void load_scratch(std::uint32_t set) {
    if (set < n_) {
      std::fill(scratch_.begin(), scratch_.end(), 0);
      scratch_[set / 64] = std::uint64_t{1} << (set % 64);
    } else {
      std::memcpy(scratch_.data(), arena_.at(bits_index_[set]), arena_.words() * 8);
    }
  }

  Result<std::uint32_t> join(const std::vector<std::uint32_t>& sets) {
    // Start from the largest input set; most joins add a few members to it.
    std::uint32_t base = sets[0];
    for (std::uint32_t s : sets) {
      if (out_.size[s] > out_.size[base]) base = s;
    }
    std::uint64_t memo_key = 0;
    if (sets.size() == 2) {
      const std::uint32_t a = std::min(sets[0], sets[1]), b = std::max(sets[0], sets[1]);
      memo_key = (std::uint64_t{a} << 32) | b;
      auto it = memo_.find(memo_key);
      if (it != memo_.end()) return it->second;
    }
    // Cheap exits: every other input is a singleton already in base.
    bool subset = true;
    for (std::uint32_t s : sets) {
      if (s != base && !(s < n_ && contains(base, s))) {
        subset = false;
        break;
      }
    }
    std::uint32_t result = base;
    if (!subset) {
      load_scratch(base);
      std::uint32_t added = 0, x = out_.member_xor[base];
      std::int64_t w = out_.weight[base];
      for (std::uint32_t s : sets) {
        if (s != base) merge_into_scratch(s, added, x, w);
      }
      if (added != 0) {
        Result<std::uint32_t> found = intern(out_.size[base] + added, x, w);
        if (!found.ok()) return found.status();
        result = *found;
      }
    }
    if (sets.size() == 2) memo_.emplace(memo_key, result);
    return result;
  }

  // Returns the id of the set held in scratch_, creating it when new.
  Result<std::uint32_t> intern(std::uint32_t size, std::uint32_t x, std::int64_t w) {
    const std::uint64_t h = hash_words(scratch_.data(), arena_.words());
    auto [lo, hi] = by_hash_.equal_range(h);
    for (auto it = lo; it != hi; ++it) {
      const std::uint32_t s = it->second;
      if (out_.size[s] == size &&
          std::memcmp(arena_.at(bits_index_[s]), scratch_.data(), arena_.words() * 8) == 0) {
        return s;
      }
    }
    if (arena_.bytes_for(arena_.count() + 1) > max_bytes_) {
      return Status(StatusCode::resource_exhausted,
                    "dependency analysis: the graph has more than " + std::to_string(arena_.count()) +
                        " distinct dependency sets over " + std::to_string(n_) +
                        " recvs, needing more than " + std::to_string(max_bytes_ >> 20) +
                        " MiB of bitsets; use fifo or layer, which need no dependency analysis");
    }
    const auto id = static_cast<std::uint32_t>(out_.num_sets());
    bits_index_.push_back(arena_.add(scratch_.data()));
    out_.size.push_back(size);
    out_.member_xor.push_back(x);
    out_.weight.push_back(w);
    by_hash_.emplace(h, id);
    return id;
  }

  const Graph& graph_;
  std::span<const std::int64_t> weight_;
  std::uint64_t max_bytes_;
  std::uint32_t n_;
  BitsetArena arena_;
  std::vector<std::uint64_t> scratch_;
  std::vector<std::size_t> bits_index_;  // per set; kNoBits for singletons
  std::unordered_multimap<std::uint64_t, std::uint32_t> by_hash_;
  std::unordered_map<std::uint64_t, std::uint32_t> memo_;
  std::vector<std::uint64_t> edges_;
  DepSets out_;
};

}  // namespace

Result<DepSets> analyze_deps(const Graph& graph, std::span<const std::int64_t> recv_weight,
                             std::uint64_t max_bitset_bytes) {
  if (!recv_weight.empty() && recv_weight.size() != graph.recvs().size()) {
    return invalid_argument("analyze_deps: " + std::to_string(recv_weight.size()) +
                            " recv weights given for " + std::to_string(graph.recvs().size()) +
                            " recvs");
  }
  Builder builder(graph, recv_weight, max_bitset_bytes);
  return builder.run();
}

}  // namespace tictac::priority::policies
