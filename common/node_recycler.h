// NodeRecycler: keeps erased nodes of a node-based container (std::map, std::set,
// std::unordered_map, std::unordered_set) for reuse, so that a key that comes and goes (a peer's
// send lane, a (peer, tag) receive queue, a message id) costs no heap allocation once warm.
//
// Contract:
//  - erase(c, it) removes *it from c. Up to `Max` nodes are kept (C++17 node handles: the node and
//    the value inside it, with whatever storage the value still owns, e.g. a std::deque's block);
//    beyond that the node is freed as by c.erase(it). erase(c, it, release) first calls
//    release(mapped) for values that hold what must not wait for a reuse (a message's buffer).
//  - try_emplace(c, key, reset) is c.try_emplace(key) that takes a kept node when one is spare: the
//    node gets `key`, and for maps `reset(mapped)` must bring the old value to the state a fresh
//    value-initialised one would have (clear containers, zero counters); without `reset` the value
//    is assigned a value-initialised one (right for plain structs; give containers a reset that
//    clears them, which keeps their storage). Returns c.try_emplace's pair.
//  - The nodes are compatible between all containers of one type, so one recycler may serve many.
//  - Not thread-safe: the owner's thread only, like the containers it serves.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

namespace tictac {

template <class Container, std::size_t Max = 64>
class NodeRecycler {
 public:
  using node_type = typename Container::node_type;
  using iterator = typename Container::iterator;
  using key_type = typename Container::key_type;

  void erase(Container& c, iterator it) {
    if (spare_.size() < Max) {
      if (spare_.capacity() == 0) spare_.reserve(Max);
      spare_.push_back(c.extract(it));
    } else {
      c.erase(it);
    }
  }
  // erase(), after `release(value)` frees what a kept value should not hold on to (a buffer).
  template <class Release>
  void erase(Container& c, iterator it, Release&& release) {
    release(it->second);
    erase(c, it);
  }

  template <class Reset>
  std::pair<iterator, bool> try_emplace(Container& c, const key_type& key, Reset&& reset) {
    if (spare_.empty()) return emplace_fresh(c, key);
    if (auto found = c.find(key); found != c.end()) return {found, false};
    node_type node = std::move(spare_.back());
    spare_.pop_back();
    if constexpr (requires { node.mapped(); }) {
      node.key() = key;
      reset(node.mapped());
    } else {
      node.value() = key;
    }
    auto r = c.insert(std::move(node));
    return {r.position, r.inserted};
  }
  std::pair<iterator, bool> try_emplace(Container& c, const key_type& key) {
    return try_emplace(c, key, [](auto& m) { m = std::remove_reference_t<decltype(m)>{}; });
  }

  std::size_t spare() const { return spare_.size(); }

 private:
  static std::pair<iterator, bool> emplace_fresh(Container& c, const key_type& key) {
    if constexpr (requires { c.try_emplace(key); }) {
      return c.try_emplace(key);
    } else {
      return c.insert(key);
    }
  }

  std::vector<node_type> spare_;
};

}  // namespace tictac
