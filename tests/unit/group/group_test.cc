// Rank groups over real TCP on loopback: mesh bootstrap, p2p, collectives, failures.
#include "integration/group/group.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <numeric>
#include <thread>

#include "integration/group/listen_address.h"
#include "integration/group/tags.h"
#include "transport/bootstrap/in_memory_store.h"

namespace tictac::group {
namespace {

using namespace std::chrono_literals;

GroupOptions options(int rank, int size, std::chrono::milliseconds timeout = 10s) {
  GroupOptions o;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  o.listen_address = "tcp://127.0.0.1:0";
  o.key_prefix = "test/";
  return o;
}

// Creates `size` groups concurrently (creation blocks until the mesh is up).
std::vector<std::unique_ptr<Group>> make_groups(bootstrap::Store& store, int size,
                                                std::chrono::milliseconds timeout = 10s) {
  std::vector<std::future<Result<std::unique_ptr<Group>>>> futures;
  for (int r = 0; r < size; ++r) {
    futures.push_back(std::async(std::launch::async, [&store, r, size, timeout] {
      return Group::create(store, options(r, size, timeout));
    }));
  }
  std::vector<std::unique_ptr<Group>> groups;
  for (auto& f : futures) {
    auto g = f.get();
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    groups.push_back(g.ok() ? std::move(*g) : nullptr);
  }
  return groups;
}

// Runs fn(rank) on one thread per rank and collects the Statuses.
std::vector<Status> on_all(int size, const std::function<Status(int)>& fn) {
  std::vector<std::future<Status>> futures;
  for (int r = 0; r < size; ++r) futures.push_back(std::async(std::launch::async, fn, r));
  std::vector<Status> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

struct Outcome {
  std::promise<std::tuple<Status, std::uint64_t, int>> promise;
  Done done() {
    return [this](const Status& s, std::uint64_t n, int src) { promise.set_value({s, n, src}); };
  }
  std::tuple<Status, std::uint64_t, int> get() { return promise.get_future().get(); }
};

void sum_floats(void* acc, const void* in, std::size_t n) {
  auto* a = static_cast<float*>(acc);
  const auto* b = static_cast<const float*>(in);
  for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
}

TEST(MeshNames, RoundTripAndRejectForeignNames) {
  EXPECT_EQ(parse_mesh_peer_name(mesh_peer_name("pg0/", 3, 8), "pg0/", 8), 3);
  EXPECT_EQ(parse_mesh_peer_name(mesh_peer_name("pg1/", 3, 8), "pg0/", 8), -1);  // other group
  EXPECT_EQ(parse_mesh_peer_name(mesh_peer_name("pg0/", 3, 4), "pg0/", 8), -1);  // other size
  EXPECT_EQ(parse_mesh_peer_name("tictac-group pg0/ rank 9 of 8", "pg0/", 8), -1);
  EXPECT_EQ(parse_mesh_peer_name("tictac-group pg0/ rank x of 8", "pg0/", 8), -1);
  EXPECT_EQ(parse_mesh_peer_name("host:123", "pg0/", 8), -1);
}

TEST(Tags, UserAndCollectiveTagsNeverCollide) {
  EXPECT_FALSE(is_collective_tag(user_tag(-1)));
  EXPECT_FALSE(is_collective_tag(user_tag(0x7fffffff)));
  EXPECT_TRUE(is_collective_tag(collective_tag(0, 0)));
  EXPECT_NE(collective_tag(1, 0), collective_tag(0, 1));
  EXPECT_EQ(user_tag(-1), 0xffffffffULL);
}

TEST(PriorityTable, TableThenThreadOverride) {
  PriorityTable t;
  EXPECT_EQ(t.lookup(5), PriorityTable::kDefaultPriority);
  t.replace({{5, 2}, {6, 1}});
  EXPECT_EQ(t.lookup(5), 2);
  t.update({{5, 7}});
  EXPECT_EQ(t.lookup(5), 7);
  EXPECT_EQ(t.lookup(6), 1);
  PriorityTable::push_thread_priority(-3);
  PriorityTable::push_thread_priority(-4);
  EXPECT_EQ(t.lookup(5), -4);
  EXPECT_TRUE(PriorityTable::pop_thread_priority());
  EXPECT_EQ(t.lookup(5), -3);
  std::thread([&] { EXPECT_EQ(t.lookup(5), 7); }).join();  // overrides are per thread
  EXPECT_TRUE(PriorityTable::pop_thread_priority());
  EXPECT_FALSE(PriorityTable::pop_thread_priority());
  t.clear();
  EXPECT_EQ(t.size(), 0u);
}

TEST(ListenAddress, EnvironmentChoices) {
  ::setenv("TICTAC_LISTEN_ADDR", "10.1.2.3", 1);
  EXPECT_EQ(*choose_listen_address(), "tcp://10.1.2.3:0");
  ::setenv("TICTAC_LISTEN_ADDR", "tcp://10.1.2.3:77", 1);
  EXPECT_EQ(*choose_listen_address(), "tcp://10.1.2.3:77");
  ::setenv("TICTAC_LISTEN_ADDR", "tcp://", 1);
  Result<std::string> bad = choose_listen_address();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_LISTEN_ADDR"), std::string::npos);
  ::unsetenv("TICTAC_LISTEN_ADDR");
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  EXPECT_EQ(*choose_listen_address(), "tcp://127.0.0.1:0");
  ::setenv("MASTER_ADDR", "no-such-host.invalid", 1);
  Result<std::string> unresolved = choose_listen_address();
  ASSERT_FALSE(unresolved.ok());
  EXPECT_NE(unresolved.status().message().find("MASTER_ADDR"), std::string::npos);
  ::unsetenv("MASTER_ADDR");
  EXPECT_EQ(*choose_listen_address(), "tcp://127.0.0.1:0");
  EXPECT_EQ(*local_address_towards("127.0.0.1"), "127.0.0.1");
}

TEST(Group, BadRankIsRefused) {
  bootstrap::InMemoryStore store;
  Result<std::unique_ptr<Group>> g = Group::create(store, options(2, 2));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::invalid_argument);
}

TEST(Group, PointToPointTagsOrderAndAnySource) {
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, 3);
  ASSERT_TRUE(groups[0] && groups[1] && groups[2]);
  // Two messages with one tag arrive in order; a different tag matches independently.
  std::vector<int> a{1, 2, 3}, b{4, 5, 6}, c{7, 8, 9};
  std::vector<int> ra(3), rb(3), rc(3);
  Outcome s1, s2, s3, r1, r2, r3;
  groups[1]->recv(0, user_tag(9), rc.data(), 12, r3.done());
  groups[1]->recv(0, user_tag(5), ra.data(), 12, r1.done());
  groups[1]->recv(0, user_tag(5), rb.data(), 12, r2.done());
  groups[0]->send(1, user_tag(5), a.data(), 12, 0, s1.done());
  groups[0]->send(1, user_tag(5), b.data(), 12, 0, s2.done());
  groups[0]->send(1, user_tag(9), c.data(), 12, 0, s3.done());
  for (Outcome* o : {&s1, &s2, &s3, &r1, &r2, &r3}) {
    auto [st, n, src] = o->get();
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(n, 12u);
  }
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
  EXPECT_EQ(rc, c);
  // Any-source reports the sender's rank.
  int value = 42, got = 0;
  Outcome any, sent;
  groups[0]->recv(kAnyRank, user_tag(1), &got, sizeof(got), any.done());
  groups[2]->send(0, user_tag(1), &value, sizeof(value), 0, sent.done());
  auto [st, n, src] = any.get();
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(src, 2);
  EXPECT_EQ(got, 42);
  EXPECT_TRUE(std::get<0>(sent.get()).ok());
}

TEST(Group, SendToSelfOrOutOfRangeFailsAsynchronouslyNamingTheRank) {
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, 2);
  ASSERT_TRUE(groups[0] && groups[1]);
  int x = 0;
  Outcome self, far;
  groups[0]->send(0, user_tag(1), &x, sizeof(x), 0, self.done());
  groups[0]->recv(5, user_tag(1), &x, sizeof(x), far.done());
  auto [s1, n1, r1] = self.get();
  EXPECT_EQ(s1.code(), StatusCode::invalid_argument);
  EXPECT_NE(s1.message().find("rank 0"), std::string::npos) << s1.to_string();
  auto [s2, n2, r2] = far.get();
  EXPECT_EQ(s2.code(), StatusCode::invalid_argument);
  EXPECT_NE(s2.message().find("rank 5"), std::string::npos) << s2.to_string();
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllreduceBroadcastAllgatherBarrier) {
  const int n = GetParam();
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, n);
  for (auto& g : groups) ASSERT_TRUE(g);
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{100003}}) {
    std::vector<std::vector<float>> data(n);
    for (int r = 0; r < n; ++r) {
      data[r].resize(count);
      for (std::size_t i = 0; i < count; ++i) data[r][i] = static_cast<float>((r + 1) * (i % 13));
    }
    auto st = on_all(n, [&](int r) {
      return groups[r]->allreduce(data[r].data(), count, sizeof(float), sum_floats);
    });
    for (const Status& s : st) ASSERT_TRUE(s.ok()) << s.to_string();
    const float ranks_sum = static_cast<float>(n * (n + 1) / 2);
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < count; ++i) {
        ASSERT_EQ(data[r][i], ranks_sum * static_cast<float>(i % 13)) << "rank " << r << " i " << i;
      }
    }
  }
  // Broadcast from the last rank.
  std::vector<std::vector<std::uint8_t>> buf(n, std::vector<std::uint8_t>(1000));
  std::iota(buf[n - 1].begin(), buf[n - 1].end(), 0);
  for (auto s : on_all(n, [&](int r) { return groups[r]->broadcast(buf[r].data(), 1000, n - 1); })) {
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(buf[r], buf[n - 1]);
  // Allgather of each rank's id.
  std::vector<std::vector<int>> out(n, std::vector<int>(n, -1));
  std::vector<int> mine(n);
  std::iota(mine.begin(), mine.end(), 100);
  for (auto s : on_all(n, [&](int r) { return groups[r]->allgather(&mine[r], sizeof(int), out[r].data()); })) {
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(out[r], mine);
  for (auto s : on_all(n, [&](int r) { return groups[r]->barrier(); })) ASSERT_TRUE(s.ok());
}

INSTANTIATE_TEST_SUITE_P(Sizes, Collectives, ::testing::Values(1, 2, 3, 4));

TEST(Group, CollectiveTimesOutNamingTheMissingRank) {
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, 3, 500ms);
  for (auto& g : groups) ASSERT_TRUE(g);
  // Rank 2 never joins the barrier: both others wait for it and name it.
  auto st = on_all(2, [&](int r) { return groups[r]->barrier(); });
  for (const Status& s : st) {
    ASSERT_EQ(s.code(), StatusCode::timeout) << s.to_string();
    EXPECT_NE(s.message().find("rank(s) 2"), std::string::npos) << s.to_string();
  }
}

TEST(Group, DeadPeerFailsPendingReceiveNamingTheRank) {
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, 2);
  ASSERT_TRUE(groups[0] && groups[1]);
  int x = 0;
  Outcome pending;
  groups[0]->recv(1, user_tag(3), &x, sizeof(x), pending.done());
  groups[1].reset();  // rank 1 goes away
  auto [s, n, src] = pending.get();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.to_string();
}

TEST(Group, MismatchedSizesAreAProtocolError) {
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, 2);
  ASSERT_TRUE(groups[0] && groups[1]);
  std::vector<std::uint8_t> big(64), small(32);
  auto st = on_all(2, [&](int r) {
    return r == 0 ? groups[0]->broadcast(big.data(), 64, 0) : groups[1]->broadcast(small.data(), 32, 0);
  });
  EXPECT_FALSE(st[1].ok());
}

}  // namespace
}  // namespace tictac::group

#include "integration/group/serial_executor.h"

namespace tictac::group {
namespace {

TEST(SerialExecutor, RunsInOrderAndDrainsOnShutdown) {
  std::vector<int> seen;
  {
    SerialExecutor ex("test-exec");
    for (int i = 0; i < 100; ++i) EXPECT_TRUE(ex.post([&seen, i] { seen.push_back(i); }));
    ex.shutdown();
    EXPECT_FALSE(ex.post([&seen] { seen.push_back(-1); }));
  }
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
}

}  // namespace
}  // namespace tictac::group
