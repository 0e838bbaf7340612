// The chunked ring collectives (ring.h) and the rooted/personalised ones (rooted.h) on 1-4
// ranks over real TCP on loopback, against values computed here. Sizes cover empty, fewer
// elements than ranks, uneven blocks and several ring chunks (> kRingChunkBytes per block).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <future>
#include <numeric>
#include <thread>

#include "integration/group/flow.h"
#include "integration/group/group.h"
#include "integration/group/ring.h"
#include "integration/group/rooted.h"
#include "integration/group/tags.h"
#include "transport/bootstrap/in_memory_store.h"
#include "transport/counters.h"

namespace tictac::group {
namespace {

using namespace std::chrono_literals;

std::vector<std::unique_ptr<Group>> make_groups(bootstrap::Store& store, int size) {
  std::vector<std::future<Result<std::unique_ptr<Group>>>> futures;
  for (int r = 0; r < size; ++r) {
    futures.push_back(std::async(std::launch::async, [&store, r, size] {
      GroupOptions o;
      o.rank = r;
      o.size = size;
      o.timeout = 20s;
      o.listen_address = "tcp://127.0.0.1:0";
      o.key_prefix = "coll/";
      return Group::create(store, o);
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

void on_all(int size, const std::function<Status(int)>& fn) {
  std::vector<std::future<Status>> futures;
  for (int r = 0; r < size; ++r) futures.push_back(std::async(std::launch::async, fn, r));
  for (auto& f : futures) {
    const Status s = f.get();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
}

void sum_i64(void* acc, const void* in, std::size_t n) {
  auto* a = static_cast<std::int64_t*>(acc);
  const auto* b = static_cast<const std::int64_t*>(in);
  for (std::size_t i = 0; i < n; ++i) a[i] += b[i];
}

std::int64_t value(int rank, std::size_t i) {
  return static_cast<std::int64_t>((rank + 1) * 1000003) + static_cast<std::int64_t>(i % 9973);
}

class Coll : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    groups_ = make_groups(store_, GetParam());
    for (auto& g : groups_) ASSERT_TRUE(g);
  }
  int n() const { return GetParam(); }
  bootstrap::InMemoryStore store_;
  std::vector<std::unique_ptr<Group>> groups_;
};

// Element counts: empty, fewer than ranks, uneven, and 3 MiB of int64 (several chunks a block).
const std::size_t kCounts[] = {0, 1, 7, 100003, 3 * 131072 + 5};

TEST_P(Coll, AllreduceReduceAndReduceScatterSum) {
  for (std::size_t count : kCounts) {
    std::vector<std::vector<std::int64_t>> data(n()), red(n()), rs(n());
    for (int r = 0; r < n(); ++r) {
      data[r].resize(count);
      for (std::size_t i = 0; i < count; ++i) data[r][i] = value(r, i);
      red[r] = data[r];
      rs[r] = data[r];
    }
    const int root = n() - 1;
    on_all(n(), [&](int r) { return groups_[r]->allreduce(data[r].data(), count, 8, sum_i64); });
    on_all(n(),
           [&](int r) { return reduce(*groups_[r], red[r].data(), count, 8, sum_i64, root, 0); });
    // reduce-scatter over n equal blocks of count/n elements.
    const std::size_t m = count / static_cast<std::size_t>(n());
    on_all(n(), [&](int r) {
      return ring_reduce_scatter(*groups_[r], rs[r].data(), Blocks::equal(m, n()), 8, sum_i64, 0,
                                 "rs");
    });
    for (std::size_t i = 0; i < count; ++i) {
      std::int64_t want = 0;
      for (int r = 0; r < n(); ++r) want += value(r, i);
      for (int r = 0; r < n(); ++r)
        ASSERT_EQ(data[r][i], want) << "allreduce rank " << r << " i " << i;
      ASSERT_EQ(red[root][i], want) << "reduce i " << i << " count " << count;
    }
    for (int r = 0; r < n(); ++r) {
      for (std::size_t i = 0; i < m; ++i) {
        const std::size_t at = static_cast<std::size_t>(r) * m + i;
        std::int64_t want = 0;
        for (int q = 0; q < n(); ++q) want += value(q, at);
        ASSERT_EQ(rs[r][at], want) << "reduce_scatter rank " << r << " i " << i;
      }
    }
  }
}

// Out-of-place reduce-scatter: the sums land in a separate output and the input is left as it
// was, with receives a step early (three slots a chunk) and without (two), for every size.
TEST_P(Coll, ReduceScatterIntoLeavesTheInputAlone) {
  for (const char* early : {"1", "0"}) {
    ASSERT_EQ(setenv("TICTAC_RING_EARLY_RECV", early, 1), 0);
    for (std::size_t count : kCounts) {
      const std::size_t m = count / static_cast<std::size_t>(n());
      std::vector<std::vector<std::int64_t>> in(n()), out(n(), std::vector<std::int64_t>(m, -1));
      for (int r = 0; r < n(); ++r) {
        in[r].resize(count);
        for (std::size_t i = 0; i < count; ++i) in[r][i] = value(r, i);
      }
      on_all(n(), [&](int r) {
        return ring_reduce_scatter_into(*groups_[r], in[r].data(), out[r].data(),
                                        Blocks::equal(m, n()), 8, sum_i64, 0, "rs_into");
      });
      for (int r = 0; r < n(); ++r) {
        for (std::size_t i = 0; i < m; ++i) {
          const std::size_t at = static_cast<std::size_t>(r) * m + i;
          std::int64_t want = 0;
          for (int q = 0; q < n(); ++q) want += value(q, at);
          ASSERT_EQ(out[r][i], want) << "early " << early << " count " << count << " rank " << r;
        }
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(in[r][i], value(r, i)) << "input written: rank " << r << " i " << i;
        }
      }
    }
  }
  ASSERT_EQ(unsetenv("TICTAC_RING_EARLY_RECV"), 0);
}

// The ring's scratch (a block of receive slots) comes from the group's ScratchPool: repeated
// allreduces of one size allocate it once per rank, not once per call (fresh pages to fault in).
TEST_P(Coll, RepeatedAllreduceReusesItsScratch) {
  const std::size_t count = 3 * 131072 + 5;
  std::vector<std::vector<std::int64_t>> data(n(), std::vector<std::int64_t>(count));
  for (int call = 0; call < 5; ++call) {
    for (int r = 0; r < n(); ++r)
      for (std::size_t i = 0; i < count; ++i) data[r][i] = value(r, i) + call;
    on_all(n(), [&](int r) { return groups_[r]->allreduce(data[r].data(), count, 8, sum_i64); });
    for (std::size_t i = 0; i < count; i += 4099) {
      std::int64_t want = 0;
      for (int r = 0; r < n(); ++r) want += value(r, i) + call;
      for (int r = 0; r < n(); ++r) ASSERT_EQ(data[r][i], want) << "call " << call << " rank " << r;
    }
  }
  for (int r = 0; r < n(); ++r) {
    EXPECT_EQ(groups_[r]->scratch().allocations(), n() > 1 ? 1u : 0u) << "rank " << r;
    EXPECT_EQ(groups_[r]->scratch().free_buffers(), n() > 1 ? 1u : 0u) << "rank " << r;
  }
}

TEST_P(Coll, RingAllgatherUnevenBlocks) {
  const Blocks blocks = Blocks::even(3 * 131072 * static_cast<std::size_t>(n()) + 3, n());
  const std::size_t total = blocks.begin.back() + blocks.len.back();
  std::vector<std::vector<std::int64_t>> data(n(), std::vector<std::int64_t>(total, -1));
  for (int r = 0; r < n(); ++r) {
    for (std::size_t i = 0; i < blocks.len[r]; ++i) data[r][blocks.begin[r] + i] = value(r, i);
  }
  on_all(n(),
         [&](int r) { return ring_allgather(*groups_[r], data[r].data(), blocks, 8, 0, "ag"); });
  for (int r = 0; r < n(); ++r) {
    for (int b = 0; b < n(); ++b) {
      for (std::size_t i = 0; i < blocks.len[b]; ++i) {
        ASSERT_EQ(data[r][blocks.begin[b] + i], value(b, i)) << "rank " << r << " block " << b;
      }
    }
  }
}

TEST_P(Coll, GatherScatterAlltoallv) {
  const int root = n() / 2;
  // gather: rank r contributes r+1 int64s.
  std::vector<std::size_t> bytes;
  for (int r = 0; r < n(); ++r) bytes.push_back(8 * static_cast<std::size_t>(r + 1));
  const std::size_t total = std::accumulate(bytes.begin(), bytes.end(), std::size_t{0});
  std::vector<std::int64_t> gathered(total / 8, -1);
  on_all(n(), [&](int r) {
    std::vector<std::int64_t> mine(static_cast<std::size_t>(r + 1), value(r, 0));
    return gather(*groups_[r], mine.data(), mine.size() * 8, r == root ? gathered.data() : nullptr,
                  r == root ? bytes : std::vector<std::size_t>{}, root, 0);
  });
  std::size_t k = 0;
  for (int r = 0; r < n(); ++r) {
    for (int i = 0; i <= r; ++i) ASSERT_EQ(gathered[k++], value(r, 0));
  }
  // scatter: the root sends rank r r+1 int64s.
  std::vector<std::int64_t> src(total / 8);
  std::iota(src.begin(), src.end(), 5);
  std::vector<std::vector<std::int64_t>> got(n());
  on_all(n(), [&](int r) {
    got[r].assign(static_cast<std::size_t>(r + 1), -1);
    return scatter(*groups_[r], r == root ? src.data() : nullptr,
                   r == root ? bytes : std::vector<std::size_t>{}, got[r].data(), got[r].size() * 8,
                   root, 0);
  });
  k = 0;
  for (int r = 0; r < n(); ++r) {
    for (int i = 0; i <= r; ++i) ASSERT_EQ(got[r][i], src[k++]);
  }
  // alltoallv: rank s sends rank d (s + d + 1) int64s of value s*100+d.
  std::vector<std::vector<std::int64_t>> outs(n());
  on_all(n(), [&](int s) {
    std::vector<std::size_t> so, sb, ro, rb;
    std::size_t off = 0, roff = 0;
    for (int d = 0; d < n(); ++d) {
      so.push_back(off);
      sb.push_back(8 * static_cast<std::size_t>(s + d + 1));
      off += sb.back();
      ro.push_back(roff);
      rb.push_back(8 * static_cast<std::size_t>(d + s + 1));
      roff += rb.back();
    }
    std::vector<std::int64_t> in(off / 8);
    std::size_t i = 0;
    for (int d = 0; d < n(); ++d) {
      for (int c = 0; c <= s + d; ++c) in[i++] = s * 100 + d;
    }
    outs[s].assign(roff / 8, -1);
    return alltoallv(*groups_[s], in.data(), so, sb, outs[s].data(), ro, rb, 0);
  });
  for (int d = 0; d < n(); ++d) {
    std::size_t i = 0;
    for (int s = 0; s < n(); ++s) {
      for (int c = 0; c <= s + d; ++c)
        ASSERT_EQ(outs[d][i++], s * 100 + d) << "to " << d << " from " << s;
    }
  }
}

TEST_P(Coll, BadRootIsInvalidArgumentOnEveryRank) {
  std::int64_t x = 0;
  for (int r = 0; r < n(); ++r) {
    const Status s = reduce(*groups_[r], &x, 1, 8, sum_i64, n(), 0);
    EXPECT_EQ(s.code(), StatusCode::invalid_argument);
    EXPECT_NE(s.message().find("root"), std::string::npos) << s.to_string();
  }
}

// Flow::exchange: a send and a receive are one unit, handed back once, when both finished (the
// ring's one wake-up per chunk and step). Rank 1 sends 300 ms late, so rank 0's own (eager) send
// finishes long before its receive: the key must not come back before the data is in.
// Counter-check: the same pair posted as plain send + recv comes back twice.
TEST(FlowExchange, OneKeyPerPairAndTwoForPlainTransfers) {
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, 2);
  for (auto& g : groups) ASSERT_TRUE(g);
  std::vector<int> keys_seen(2, 0), plain_seen(2, 0);
  std::vector<std::vector<std::int64_t>> got(2, std::vector<std::int64_t>(1000, 0));
  on_all(2, [&](int r) -> Status {
    Group& g = *groups[static_cast<std::size_t>(r)];
    std::vector<std::int64_t> mine(1000);
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = value(r, i);
    const int peer = 1 - r;
    if (r == 1) std::this_thread::sleep_for(300ms);
    {
      Flow f(g, "exchange", kCollectivePriority);
      f.exchange(7, peer, collective_tag(1, 0), mine.data(), mine.size() * 8, peer,
                 collective_tag(1, 0), got[static_cast<std::size_t>(r)].data(), mine.size() * 8);
      if (f.outstanding() != 1) return Status(StatusCode::internal, "an exchange is one unit");
      while (f.outstanding() > 0) {
        Result<std::uint64_t> k = f.next();
        if (!k.ok()) return k.status();
        if (*k != 7) return Status(StatusCode::internal, "wrong key");
        ++keys_seen[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < mine.size(); ++i) {
          if (got[static_cast<std::size_t>(r)][i] != value(peer, i)) {
            return Status(StatusCode::internal, "rank " + std::to_string(r) +
                                                    ": the unit came back before its receive "
                                                    "finished (element " + std::to_string(i) + ")");
          }
        }
      }
    }
    std::vector<std::int64_t> sink(1000);
    Flow f(g, "plain", kCollectivePriority);
    f.send(7, peer, collective_tag(2, 0), mine.data(), mine.size() * 8);
    f.recv(7, peer, collective_tag(2, 0), sink.data(), sink.size() * 8);
    while (f.outstanding() > 0) {
      Result<std::uint64_t> k = f.next();
      if (!k.ok()) return k.status();
      ++plain_seen[static_cast<std::size_t>(r)];
    }
    return Status::Ok();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(keys_seen[static_cast<std::size_t>(r)], 1) << "rank " << r;
    EXPECT_EQ(plain_seen[static_cast<std::size_t>(r)], 2) << "rank " << r;
    for (std::size_t i = 0; i < 1000; ++i) {
      ASSERT_EQ(got[static_cast<std::size_t>(r)][i], value(1 - r, i)) << "rank " << r << " i " << i;
    }
  }
}

// READY frames sent during `calls` allreduces of 16 MiB of int64 on 4 ranks (blocks of 4 MiB:
// 4 ring chunks of 1 MiB, 6 steps each: 24 rendezvous messages per rank and call).
std::uint64_t readies_during_allreduces(int calls) {
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, 4);
  for (auto& g : groups) EXPECT_TRUE(g);
  const std::size_t count = std::size_t{2} << 20;
  std::vector<std::vector<std::int64_t>> data(4, std::vector<std::int64_t>(count));
  const std::uint64_t before = transport::transport_counters().readies_sent.load();
  for (int call = 0; call < calls; ++call) {
    for (int r = 0; r < 4; ++r) {
      for (std::size_t i = 0; i < count; ++i) data[r][i] = value(r, i);
    }
    on_all(4, [&](int r) { return groups[r]->allreduce(data[r].data(), count, 8, sum_i64); });
    for (std::size_t i = 0; i < count; i += 8191) {
      std::int64_t want = 0;
      for (int r = 0; r < 4; ++r) want += value(r, i);
      for (int r = 0; r < 4; ++r) EXPECT_EQ(data[r][i], want) << "call " << call << " rank " << r;
    }
  }
  return transport::transport_counters().readies_sent.load() - before;
}

// Each ring step's receive is posted a step early (TICTAC_RING_EARLY_RECV, default on), so the
// left neighbour's send finds it advertised and its data leaves at once. Only a ring's first step
// (whose receive is posted with its send) and a neighbour that runs a step ahead still meet a
// READY: on loopback, 78-106 of 480 step messages, against 266-302 with the early receives off,
// which is the counter-check, run in the same test: each step's receive then races its
// neighbour's send.
TEST(RingEarlyReceive, LaterStepsClaimAdvertisedReceivesInsteadOfWaitingForReady) {
  const int calls = 5;
  const std::uint64_t messages = 6 * 4 * 4 * calls;  // steps x chunks x ranks x calls
  ASSERT_EQ(unsetenv("TICTAC_RING_EARLY_RECV"), 0);
  const std::uint64_t early = readies_during_allreduces(calls);
  ASSERT_EQ(setenv("TICTAC_RING_EARLY_RECV", "0", 1), 0);
  const std::uint64_t late = readies_during_allreduces(calls);
  ASSERT_EQ(unsetenv("TICTAC_RING_EARLY_RECV"), 0);
  std::printf("READY frames in %d allreduces (%llu step messages): early receives %llu, "
              "receives posted with the send %llu\n",
              calls, static_cast<unsigned long long>(messages),
              static_cast<unsigned long long>(early), static_cast<unsigned long long>(late));
  EXPECT_GT(late, messages / 3) << "the counter-check: without early receives most steps wait";
  EXPECT_LT(2 * early, late) << "early receives should remove most READY round trips";
}

INSTANTIATE_TEST_SUITE_P(Sizes, Coll, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace tictac::group
