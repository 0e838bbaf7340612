#include "transport/send_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tictac::transport {
namespace {

SendQueueConfig cfg(std::uint64_t chunk, std::uint32_t window, bool priority = true) {
  return SendQueueConfig{chunk, window, priority};
}

// Pops everything, completing each data chunk right away (an infinitely fast backend).
std::vector<Chunk> drain(SendQueue& q, const std::function<bool(PeerId)>& can = {}) {
  std::vector<Chunk> out;
  for (int guard = 0; guard < 100000; ++guard) {
    auto c = q.pop(can);
    if (!c) break;
    out.push_back(*c);
    q.on_chunk_done(*c);
  }
  return out;
}

std::vector<std::uint64_t> messages(const std::vector<Chunk>& chunks) {
  std::vector<std::uint64_t> out;
  for (const Chunk& c : chunks) out.push_back(c.message);
  return out;
}

TEST(SendQueue, SmallerPriorityFirstAcrossLevels) {
  SendQueue q(cfg(100, 1));
  q.push(1, 10, 5, 50);
  q.push(1, 11, -3, 50);
  q.push(1, 12, 0, 50);
  q.push(1, 13, 7, 50);
  EXPECT_EQ(messages(drain(q)), (std::vector<std::uint64_t>{11, 12, 10, 13}));
  EXPECT_TRUE(q.empty());
}

// A backend with a lane of its own for urgent messages (tcp lanes): with the window full of a
// long low-priority message, a chunk of a more urgent level still goes when can_preempt says its
// lane takes it, and counts as in flight with nothing ahead. Counter-checks: without can_preempt,
// and in FIFO mode, the window holds it back.
TEST(SendQueue, AnUrgentLevelGoesPastAFullWindowWhereTheBackendHasALaneForIt) {
  for (const bool priority : {true, false}) {
    SendQueue q(cfg(100, 1, priority));
    q.push(1, 10, 5, 1000);
    auto first = q.pop({});
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(first->message, 10u);
    q.push(1, 11, 0, 50);
    EXPECT_FALSE(q.pop({}).has_value()) << "window of 1 is full";
    std::vector<Priority> asked;
    auto lane = [&](PeerId, Priority p) {
      asked.push_back(p);
      return p < 5;
    };
    auto urgent = q.pop({}, lane);
    if (!priority) {
      EXPECT_FALSE(urgent.has_value()) << "FIFO mode has no urgent levels";
      continue;
    }
    ASSERT_TRUE(urgent.has_value());
    EXPECT_EQ(urgent->message, 11u);
    EXPECT_EQ(urgent->ahead_bytes, 0u);
    EXPECT_EQ(q.in_flight(), 2u);
    EXPECT_EQ(asked, (std::vector<Priority>{0}));
    // The less urgent level is not let past the window even when asked: can_preempt says no.
    EXPECT_FALSE(q.pop({}, lane).has_value());
    q.on_chunk_done(*urgent);
    q.on_chunk_done(*first);
    EXPECT_EQ(q.pop({})->message, 10u);
  }
}

// The urgent path never puts a peer's data ahead of its own queued control message (an ANNOUNCE
// must reach the peer before the data it announces), even while the backend cannot take the
// control message; another peer's urgent data still goes.
TEST(SendQueue, AnUrgentChunkNeverGoesAheadOfItsPeersControlMessage) {
  SendQueue q(cfg(100, 1));
  q.push(1, 10, 5, 1000);
  ASSERT_TRUE(q.pop({}).has_value());
  q.push_control(1, 20);
  q.push(1, 21, 0, 50);
  q.push(2, 30, 0, 50);
  auto blocked = [](PeerId) { return false; };  // no capacity for ordinary frames
  auto lane = [](PeerId, Priority p) { return p < 5; };
  auto c = q.pop(blocked, lane);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->peer, 2u) << "peer 1's data went ahead of its control message";
  EXPECT_FALSE(q.pop(blocked, lane).has_value());
  auto control = q.pop({}, lane);  // capacity back: the control message first
  ASSERT_TRUE(control.has_value());
  EXPECT_TRUE(control->control);
  EXPECT_EQ(q.pop({}, lane)->message, 21u);
}

TEST(SendQueue, FifoWithinALevelBySequence) {
  SendQueue q(cfg(100, 1));
  std::uint64_t last_seq = 0;
  for (std::uint64_t m = 1; m <= 20; ++m) {
    const std::uint64_t seq = q.push(1, m, 4, 10);
    EXPECT_GT(seq, last_seq);
    last_seq = seq;
  }
  std::vector<std::uint64_t> expect;
  for (std::uint64_t m = 1; m <= 20; ++m) expect.push_back(m);
  EXPECT_EQ(messages(drain(q)), expect);
}

TEST(SendQueue, ChunkingCoversTheMessageExactly) {
  SendQueue q(cfg(64, 1));
  q.push(1, 1, 0, 200);
  auto chunks = drain(q);
  ASSERT_EQ(chunks.size(), 4u);
  std::uint64_t off = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].offset, off);
    EXPECT_EQ(chunks[i].last, i + 1 == chunks.size());
    off += chunks[i].length;
  }
  EXPECT_EQ(off, 200u);
  EXPECT_EQ(chunks.back().length, 8u);
}

TEST(SendQueue, ZeroByteMessageIsOneEmptyChunk) {
  SendQueue q(cfg(64, 1));
  q.push(1, 1, 0, 0);
  auto chunks = drain(q);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].length, 0u);
  EXPECT_TRUE(chunks[0].last);
}

TEST(SendQueue, WindowBoundsChunksInFlight) {
  SendQueue q(cfg(10, 3));
  q.push(1, 1, 0, 100);
  std::vector<Chunk> popped;
  while (auto c = q.pop({})) popped.push_back(*c);
  EXPECT_EQ(popped.size(), 3u);
  EXPECT_EQ(q.in_flight(), 3u);
  EXPECT_FALSE(q.pop({}).has_value());
  q.on_chunk_done(popped[0]);
  EXPECT_EQ(q.in_flight(), 2u);
  auto next = q.pop({});
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->offset, 30u);
}

TEST(SendQueue, RefillComesFromTheHighestNonEmptyLevel) {
  // A long low-priority message is in progress; a high-priority one arrives and takes the next
  // free slot: preemption at a chunk boundary.
  SendQueue q(cfg(10, 1));
  q.push(1, 1, 9, 100);
  auto c1 = q.pop({});
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->message, 1u);
  q.push(1, 2, 1, 30);
  EXPECT_FALSE(q.pop({}).has_value());  // window full
  q.on_chunk_done(*c1);
  auto rest = drain(q);
  ASSERT_GE(rest.size(), 3u);
  EXPECT_EQ(rest[0].message, 2u);
  EXPECT_EQ(rest[1].message, 2u);
  EXPECT_EQ(rest[2].message, 2u);
  EXPECT_EQ(rest[3].message, 1u);
  EXPECT_EQ(rest[3].offset, 10u);  // the low-priority message resumes where it stopped
}

TEST(SendQueue, RoundRobinBetweenPeersWithinALevel) {
  SendQueue q(cfg(10, 1));
  q.push(1, 100, 0, 30);
  q.push(2, 200, 0, 30);
  q.push(3, 300, 0, 10);
  auto chunks = drain(q);
  std::vector<PeerId> peers;
  for (const Chunk& c : chunks) peers.push_back(c.peer);
  EXPECT_EQ(peers, (std::vector<PeerId>{1, 2, 3, 1, 2, 1, 2}));
}

TEST(SendQueue, RoundRobinDoesNotCrossLevels) {
  SendQueue q(cfg(10, 1));
  q.push(1, 100, 5, 20);
  q.push(2, 200, 1, 20);
  q.push(3, 300, 1, 20);
  auto chunks = drain(q);
  std::vector<PeerId> peers;
  for (const Chunk& c : chunks) peers.push_back(c.peer);
  EXPECT_EQ(peers, (std::vector<PeerId>{2, 3, 2, 3, 1, 1}));
}

TEST(SendQueue, ControlGoesFirstAndIgnoresTheWindow) {
  SendQueue q(cfg(10, 1));
  q.push(1, 1, -100, 50);
  auto d = q.pop({});
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->control);
  q.push_control(1, 1000);
  q.push_control(2, 2000);
  auto c1 = q.pop({});
  auto c2 = q.pop({});
  ASSERT_TRUE(c1 && c2);
  EXPECT_TRUE(c1->control);
  EXPECT_TRUE(c2->control);
  EXPECT_EQ(c1->message, 1000u);
  EXPECT_EQ(c2->message, 2000u);
  EXPECT_FALSE(q.pop({}).has_value());  // data still limited by the window
  q.on_chunk_done(*c1);                 // control completions do not free data slots
  EXPECT_FALSE(q.pop({}).has_value());
  q.on_chunk_done(*d);
  EXPECT_TRUE(q.pop({}).has_value());
}

TEST(SendQueue, PeersWithoutCapacityAreSkippedNotStarved) {
  SendQueue q(cfg(10, 4));
  q.push(1, 100, 0, 20);
  q.push(2, 200, 3, 20);
  bool peer1_ok = false;
  auto can = [&](PeerId p) { return p != 1 || peer1_ok; };
  auto c = q.pop(can);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->peer, 2u);  // peer 1 is blocked: the lower level of peer 2 proceeds
  q.on_chunk_done(*c);
  peer1_ok = true;
  auto next = q.pop(can);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->peer, 1u);  // and peer 1's higher level wins again as soon as it can send
}

TEST(SendQueue, FifoModeIgnoresPriorities) {
  SendQueue q(cfg(100, 1, /*priority=*/false));
  q.push(1, 1, 9, 10);
  q.push(1, 2, 0, 10);
  q.push(1, 3, -5, 10);
  EXPECT_EQ(messages(drain(q)), (std::vector<std::uint64_t>{1, 2, 3}));
}

TEST(SendQueue, RemoveDropsTheUnsentRest) {
  SendQueue q(cfg(10, 1));
  q.push(1, 1, 0, 50);
  q.push(1, 2, 0, 10);
  auto c = q.pop({});
  ASSERT_TRUE(c);
  q.on_chunk_done(*c);
  SendQueue::Removed r = q.remove(1, 1);
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.popped_bytes, 10u);
  EXPECT_FALSE(q.remove(1, 1).found);
  EXPECT_FALSE(q.remove(9, 2).found);  // wrong peer
  EXPECT_EQ(messages(drain(q)), (std::vector<std::uint64_t>{2}));
}

TEST(SendQueue, RemovePeerReleasesItsWindowSlots) {
  SendQueue q(cfg(10, 2));
  q.push(1, 1, 0, 100);
  q.push(2, 2, 0, 100);
  auto a = q.pop({});
  auto b = q.pop({});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(q.in_flight(), 2u);
  q.remove_peer(a->peer);
  EXPECT_EQ(q.in_flight(), 1u);
  q.on_chunk_done(*a);  // late completion of a forgotten peer: ignored
  EXPECT_EQ(q.in_flight(), 1u);
  auto chunks = drain(q);
  for (const Chunk& c : chunks) EXPECT_EQ(c.peer, b->peer);
  EXPECT_TRUE(q.empty());
}

TEST(SendQueue, LowerLevelsStarveWhileHigherOnesHaveData) {
  // The documented policy: strict priority, no aging.
  SendQueue q(cfg(10, 1));
  q.push(1, 1, 5, 10);
  for (std::uint64_t m = 2; m < 50; ++m) {
    q.push(1, m, 0, 10);
    auto c = q.pop({});
    ASSERT_TRUE(c);
    EXPECT_EQ(c->message, m);
    q.on_chunk_done(*c);
  }
  auto c = q.pop({});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->message, 1u);
}

}  // namespace
}  // namespace tictac::transport
