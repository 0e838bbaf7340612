// NodeRecycler (common/node_recycler.h): erased nodes come back for new keys with their storage,
// values are reset on reuse, a release hook frees what must not wait, and at most Max are kept.
#include "common/node_recycler.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

namespace tictac {
namespace {

TEST(NodeRecycler, AnErasedNodeServesTheNextNewKeyAndItsValueIsReset) {
  std::unordered_map<int, std::deque<int>> m;
  NodeRecycler<decltype(m), 4> nodes;
  auto clear = [](std::deque<int>& q) { q.clear(); };
  auto [it, inserted] = nodes.try_emplace(m, 1, clear);
  ASSERT_TRUE(inserted);
  it->second.push_back(7);
  const std::deque<int>* storage = &it->second;
  nodes.erase(m, it);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(nodes.spare(), 1u);
  auto [again, inserted_again] = nodes.try_emplace(m, 2, clear);
  EXPECT_TRUE(inserted_again);
  EXPECT_EQ(again->first, 2);
  EXPECT_EQ(&again->second, storage) << "the kept node should have been reused";
  EXPECT_TRUE(again->second.empty()) << "reset should have cleared the old value";
  EXPECT_EQ(nodes.spare(), 0u);
  // An existing key is found, not replaced, and takes no spare node.
  again->second.push_back(3);
  nodes.erase(m, nodes.try_emplace(m, 9).first);
  auto [same, inserted_same] = nodes.try_emplace(m, 2, clear);
  EXPECT_FALSE(inserted_same);
  EXPECT_EQ(same->second.size(), 1u);
  EXPECT_EQ(nodes.spare(), 1u);
}

TEST(NodeRecycler, DefaultResetValueInitialisesAndSetsAndOrderedMapsWork) {
  std::map<int, int> counts;
  NodeRecycler<decltype(counts), 4> count_nodes;
  ++count_nodes.try_emplace(counts, 5).first->second;
  count_nodes.erase(counts, counts.begin());
  EXPECT_EQ(count_nodes.try_emplace(counts, 6).first->second, 0) << "a reused counter starts at 0";

  std::set<int> ids;
  NodeRecycler<decltype(ids), 4> id_nodes;
  id_nodes.try_emplace(ids, 1);
  id_nodes.try_emplace(ids, 3);
  id_nodes.erase(ids, ids.begin());
  EXPECT_TRUE(id_nodes.try_emplace(ids, 2).second);
  EXPECT_EQ(ids, (std::set<int>{2, 3}));
}

TEST(NodeRecycler, KeepsAtMostMaxAndReleaseRunsAtErase) {
  std::unordered_map<int, std::unique_ptr<int>> m;
  NodeRecycler<decltype(m), 2> nodes;
  for (int k = 0; k < 5; ++k) nodes.try_emplace(m, k).first->second = std::make_unique<int>(k);
  int released = 0;
  for (int k = 0; k < 5; ++k) {
    nodes.erase(m, m.find(k), [&](std::unique_ptr<int>& p) {
      p.reset();
      ++released;
    });
  }
  EXPECT_EQ(released, 5);
  EXPECT_EQ(nodes.spare(), 2u);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(nodes.try_emplace(m, 8).first->second, nullptr);
}

}  // namespace
}  // namespace tictac
