// ArrivedMessages: kept per peer, taken once, bounded by bytes with the oldest peer forgotten.
#include "transport/arrived_messages.h"

#include <gtest/gtest.h>

#include <cstring>

namespace tictac::transport {
namespace {

ArrivedMessages::Message msg(Tag tag, std::size_t n, std::byte fill) {
  ArrivedMessages::Message m{tag, n, n > 0 ? std::make_unique<std::byte[]>(n) : nullptr};
  if (n > 0) std::memset(m.bytes.get(), static_cast<int>(fill), n);
  return m;
}

TEST(ArrivedMessages, KeepsTakesOnceAndCountsBytes) {
  ArrivedMessages a(1000);
  EXPECT_TRUE(a.keep(1, 10, msg(5, 100, std::byte{7})).empty());
  EXPECT_TRUE(a.keep(1, 11, msg(5, 0, std::byte{0})).empty());
  EXPECT_TRUE(a.holds(1, 10));
  EXPECT_FALSE(a.holds(2, 10));
  EXPECT_EQ(a.bytes(), 100u);
  EXPECT_EQ(a.count(), 2u);
  std::optional<ArrivedMessages::Message> m = a.take(1, 10);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->total, 100u);
  EXPECT_EQ(m->bytes[99], std::byte{7});
  EXPECT_FALSE(a.take(1, 10).has_value());
  EXPECT_EQ(a.bytes(), 0u);
  ASSERT_TRUE(a.take(1, 11).has_value());
  EXPECT_EQ(a.count(), 0u);
}

TEST(ArrivedMessages, PastTheBoundThePeerThatDiedFirstIsForgotten) {
  ArrivedMessages a(1000);
  EXPECT_TRUE(a.keep(1, 1, msg(0, 400, std::byte{1})).empty());
  EXPECT_TRUE(a.keep(2, 1, msg(0, 400, std::byte{2})).empty());
  EXPECT_TRUE(a.keep(1, 2, msg(0, 100, std::byte{1})).empty());  // peer 1 still first
  std::vector<ArrivedMessages::Dropped> dropped = a.keep(3, 1, msg(0, 300, std::byte{3}));
  ASSERT_EQ(dropped.size(), 2u);  // both of peer 1's
  for (const auto& [peer, id] : dropped) EXPECT_EQ(peer, 1u);
  EXPECT_FALSE(a.holds(1, 1));
  EXPECT_TRUE(a.holds(2, 1));
  EXPECT_TRUE(a.holds(3, 1));
  EXPECT_EQ(a.bytes(), 700u);
}

TEST(ArrivedMessages, DropPeerReturnsItsIdsAndLeavesOthers) {
  ArrivedMessages a(1000);
  (void)a.keep(4, 8, msg(0, 10, std::byte{1}));
  (void)a.keep(5, 9, msg(0, 10, std::byte{1}));
  std::vector<std::uint64_t> ids = a.drop_peer(4);
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], 8u);
  EXPECT_TRUE(a.drop_peer(4).empty());
  EXPECT_TRUE(a.holds(5, 9));
  // The bound still works after drop_peer (peer 4's place in the order is gone).
  std::vector<ArrivedMessages::Dropped> dropped = a.keep(6, 1, msg(0, 995, std::byte{1}));
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].first, 5u);
}

}  // namespace
}  // namespace tictac::transport
