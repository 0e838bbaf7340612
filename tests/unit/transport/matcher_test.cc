// Matcher: the queries adverts rely on (any_source_waiting, waiting_for), per-peer counts, the
// interleaving of specific and any-source receives by posting order, and that cancelled
// receives and dropped messages leave no trace behind (lazy entries are skipped).
#include <gtest/gtest.h>

#include "transport/matcher.h"

namespace tictac::transport {
namespace {

TEST(MatcherQueries, AnySourceAndWaitingCounts) {
  Matcher m;
  EXPECT_FALSE(m.any_source_waiting(7));
  EXPECT_EQ(m.waiting_for(1, 7), 0u);
  EXPECT_FALSE(m.on_recv(10, 1, 7));
  EXPECT_FALSE(m.on_recv(11, 1, 7));
  EXPECT_FALSE(m.on_recv(12, 2, 7));
  EXPECT_EQ(m.waiting_for(1, 7), 2u);
  EXPECT_EQ(m.waiting_for(2, 7), 1u);
  EXPECT_FALSE(m.any_source_waiting(7));
  EXPECT_FALSE(m.on_recv(13, kAnyPeer, 7));
  EXPECT_TRUE(m.any_source_waiting(7));
  EXPECT_FALSE(m.any_source_waiting(8));
  EXPECT_TRUE(m.cancel_recv(13));
  EXPECT_FALSE(m.any_source_waiting(7));
  EXPECT_TRUE(m.cancel_recv(10));
  EXPECT_FALSE(m.cancel_recv(10));
  EXPECT_EQ(m.waiting_for(1, 7), 1u);
  // The cancelled receive is skipped: the next message from peer 1 goes to 11.
  EXPECT_EQ(m.on_message(1, 7, 100), std::optional<RequestId>(11));
  EXPECT_EQ(m.waiting_for(1, 7), 0u);
  EXPECT_EQ(m.posted(), 1u);
}

TEST(MatcherQueries, PostingOrderDecidesBetweenSpecificAndAnySource) {
  Matcher m;
  EXPECT_FALSE(m.on_recv(1, kAnyPeer, 5));
  EXPECT_FALSE(m.on_recv(2, 3, 5));
  EXPECT_FALSE(m.on_recv(3, kAnyPeer, 5));
  EXPECT_EQ(m.on_message(3, 5, 1), std::optional<RequestId>(1));  // any-source posted first
  EXPECT_EQ(m.on_message(3, 5, 2), std::optional<RequestId>(2));
  EXPECT_EQ(m.on_message(4, 5, 1), std::optional<RequestId>(3));
  EXPECT_EQ(m.on_message(4, 5, 2), std::nullopt);
  EXPECT_EQ(m.unexpected_from(4), 1u);
  EXPECT_EQ(m.unexpected_from(3), 0u);
}

TEST(MatcherQueries, UnexpectedMessagesByPeerAndAnySource) {
  Matcher m;
  EXPECT_EQ(m.on_message(1, 9, 10), std::nullopt);
  EXPECT_EQ(m.on_message(2, 9, 20), std::nullopt);
  EXPECT_EQ(m.on_message(1, 9, 11), std::nullopt);
  EXPECT_EQ(m.unexpected_from(1), 2u);
  EXPECT_TRUE(m.drop_message(1, 10));
  EXPECT_FALSE(m.drop_message(1, 10));
  // Any-source takes the oldest live one (20: 10 was dropped).
  auto a = m.on_recv(50, kAnyPeer, 9);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->msg_id, 20u);
  auto b = m.on_recv(51, 1, 9);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->msg_id, 11u);
  EXPECT_EQ(m.unexpected(), 0u);
  EXPECT_FALSE(m.has_unexpected(kAnyPeer, 9));
}

TEST(MatcherQueries, DropPeerReturnsItsReceivesInPostingOrder) {
  Matcher m;
  EXPECT_FALSE(m.on_recv(5, 1, 1));
  EXPECT_FALSE(m.on_recv(3, 1, 2));
  EXPECT_FALSE(m.on_recv(4, kAnyPeer, 1));
  EXPECT_FALSE(m.on_recv(9, 1, 1));
  EXPECT_EQ(m.on_message(1, 3, 1), std::nullopt);
  EXPECT_EQ(m.drop_peer(1), (std::vector<RequestId>{5, 3, 9}));
  EXPECT_EQ(m.unexpected_from(1), 0u);
  EXPECT_EQ(m.waiting_for(1, 1), 0u);
  EXPECT_EQ(m.take_all_recvs(), (std::vector<RequestId>{4}));
}

TEST(MatcherQueries, ManyKeysStayCheap) {
  // 200k receives and messages with distinct tags: linear scans would take minutes.
  Matcher m;
  constexpr int n = 200000;
  for (int i = 0; i < n; ++i) EXPECT_FALSE(m.on_recv(static_cast<RequestId>(i + 1), 1, static_cast<Tag>(i)));
  for (int i = n - 1; i >= 0; --i) {
    ASSERT_EQ(m.on_message(1, static_cast<Tag>(i), static_cast<std::uint64_t>(i + 1)),
              std::optional<RequestId>(static_cast<RequestId>(i + 1)));
  }
  EXPECT_EQ(m.posted(), 0u);
}

}  // namespace
}  // namespace tictac::transport
