// Backend choice for groups (TICTAC_BACKENDS, backend_choice.h): the registry, the preference
// list, which backend each pair of ranks ends up on (checked through Group::backend_of and by
// running collectives over it), and the errors for unknown, missing and non-viable backends.
#include "integration/group/backend_choice.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <future>
#include <numeric>

#include "integration/group/backend_registry.h"
#include "integration/group/group.h"
#include "transport/bootstrap/in_memory_store.h"

namespace tictac::group {
namespace {

using namespace std::chrono_literals;

bool ucx_viable(std::string* why) {
  const BackendEntry* e = find_backend("ucx");
  if (e == nullptr || !e->create) {
    *why = e == nullptr ? "ucx is not registered" : e->missing;
    return false;
  }
  const transport::Viability v = e->create()->viability();
  *why = v.reason;
  return v.viable;
}

std::vector<Result<std::unique_ptr<Group>>> make_groups(bootstrap::Store& store,
                                                        const std::vector<std::string>& lists) {
  const int n = static_cast<int>(lists.size());
  std::vector<std::future<Result<std::unique_ptr<Group>>>> futures;
  for (int r = 0; r < n; ++r) {
    futures.push_back(std::async(std::launch::async, [&store, &lists, r, n] {
      GroupOptions o;
      o.rank = r;
      o.size = n;
      o.timeout = 5s;
      o.listen_address = "tcp://127.0.0.1:0";
      o.key_prefix = "backends/";
      o.backends = lists[static_cast<std::size_t>(r)];
      return Group::create(store, o);
    }));
  }
  std::vector<Result<std::unique_ptr<Group>>> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

void sum_floats(void* acc, const void* in, std::size_t count) {
  auto* a = static_cast<float*>(acc);
  const auto* b = static_cast<const float*>(in);
  for (std::size_t i = 0; i < count; ++i) a[i] += b[i];
}

// An allreduce (ring: every rank sends to its neighbour) must work over the chosen backend.
void expect_allreduce_works(std::vector<Result<std::unique_ptr<Group>>>& groups) {
  const int n = static_cast<int>(groups.size());
  const std::size_t count = 300'001;  // above the UCX rendezvous threshold per chunk at 2 ranks
  std::vector<std::vector<float>> data(static_cast<std::size_t>(n));
  std::vector<std::future<Status>> runs;
  for (int r = 0; r < n; ++r) {
    data[r].assign(count, static_cast<float>(r + 1));
    runs.push_back(std::async(std::launch::async, [&, r] {
      return (*groups[r])->allreduce(data[r].data(), count, sizeof(float), sum_floats);
    }));
  }
  for (auto& f : runs) ASSERT_TRUE(f.get().ok());
  const float want = static_cast<float>(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count; i += 997) ASSERT_EQ(data[r][i], want) << r << " " << i;
  }
}

TEST(BackendList, ParsesTrimsDeduplicatesAndNamesUnknownOnes) {
  auto names = parse_backend_list(" UCX, tcp ,,tcp", "TICTAC_BACKENDS");
  ASSERT_TRUE(names.ok()) << names.status().to_string();
  EXPECT_EQ(*names, (std::vector<std::string>{"ucx", "tcp"}));
  auto bad = parse_backend_list("tcp,infiniband", "TICTAC_BACKENDS");
  ASSERT_EQ(bad.status().code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.status().message().find("unknown backend 'infiniband'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("known: "), std::string::npos);
  EXPECT_NE(bad.status().message().find("tcp"), std::string::npos);
  EXPECT_EQ(parse_backend_list(" , ", "TICTAC_BACKENDS").status().code(),
            StatusCode::invalid_argument);
}

TEST(BackendList, RegistryHasEveryBackendAndSaysWhyOneIsMissing) {
  for (const char* name : {"tcp", "ucx", "verbs"}) {
    const BackendEntry* e = find_backend(name);
    ASSERT_NE(e, nullptr) << name;
    if (!e->create) {
      EXPECT_NE(e->missing.find("rebuild"), std::string::npos) << e->missing;
    }
  }
  ASSERT_TRUE(find_backend("tcp")->create);
}

TEST(BackendList, PickIsTheFirstOfMinePeerOffers) {
  const std::vector<std::string> offered = {"ucx://1.2.3.4:5", "tcp://1.2.3.4:6"};
  EXPECT_EQ(pick_address({"tcp", "ucx"}, offered), "tcp://1.2.3.4:6");
  EXPECT_EQ(pick_address({"ucx", "tcp"}, offered), "ucx://1.2.3.4:5");
  EXPECT_EQ(pick_address({"verbs"}, offered), "");
  EXPECT_EQ(split_addresses(join_addresses(offered)), offered);
  EXPECT_EQ(with_scheme("tcp://10.0.0.1:0", "ucx"), "ucx://10.0.0.1:0");
}

TEST(BackendChoice, DefaultIsTcp) {
  ::unsetenv("TICTAC_BACKENDS");
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, {"", ""});
  for (auto& g : groups) ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*groups[0])->backend_of(1), "tcp");
  EXPECT_EQ((*groups[1])->backend_of(0), "tcp");
  EXPECT_EQ((*groups[0])->backend_of(0), "");
}

TEST(BackendChoice, UcxFirstRunsTheGroupOverUcx) {
  std::string why;
  if (!ucx_viable(&why)) GTEST_SKIP() << "ucx not viable here: " << why;
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, {"ucx,tcp", "ucx,tcp", "ucx,tcp"});
  for (auto& g : groups) ASSERT_TRUE(g.ok()) << g.status().to_string();
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE((*groups[r])->addresses().find("tcp://"), std::string::npos);
    for (int p = 0; p < 3; ++p) {
      if (p != r) {
        EXPECT_EQ((*groups[r])->backend_of(p), "ucx") << r << "->" << p;
      }
    }
  }
  expect_allreduce_works(groups);
}

TEST(BackendChoice, TheConnectingRanksPreferenceWinsAndBothSidesAgree) {
  std::string why;
  if (!ucx_viable(&why)) GTEST_SKIP() << "ucx not viable here: " << why;
  bootstrap::InMemoryStore store;
  // rank 1 connects to rank 0 (lower ranks accept): its preference (tcp first) decides.
  auto groups = make_groups(store, {"ucx,tcp", "tcp,ucx"});
  for (auto& g : groups) ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*groups[0])->backend_of(1), "tcp");
  EXPECT_EQ((*groups[1])->backend_of(0), "tcp");
  expect_allreduce_works(groups);
}

TEST(BackendChoice, NoCommonBackendIsAnErrorNamingBothLists) {
  std::string why;
  if (!ucx_viable(&why)) GTEST_SKIP() << "ucx not viable here: " << why;
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, {"ucx", "tcp"});
  // Rank 1 finds nothing in common and fails at once; rank 0 then times out waiting for it.
  ASSERT_FALSE(groups[1].ok());
  EXPECT_NE(groups[1].status().message().find("shares no backend with rank 0"), std::string::npos)
      << groups[1].status().to_string();
  EXPECT_NE(groups[1].status().message().find("TICTAC_BACKENDS"), std::string::npos);
  EXPECT_FALSE(groups[0].ok());
}

TEST(BackendChoice, OnlyUnusableBackendsIsAnErrorNamingCauseAndFix) {
  const BackendEntry* verbs = find_backend("verbs");
  ASSERT_NE(verbs, nullptr);
  if (verbs->create && verbs->create()->viability().viable) GTEST_SKIP() << "verbs is viable here";
  ::setenv("TICTAC_BACKENDS", "verbs", 1);
  Result<BackendPlan> plan = plan_backends("");
  ::unsetenv("TICTAC_BACKENDS");
  ASSERT_EQ(plan.status().code(), StatusCode::unavailable);
  const std::string& m = plan.status().message();
  EXPECT_NE(m.find("TICTAC_BACKENDS='verbs'"), std::string::npos) << m;
  EXPECT_NE(m.find("verbs: "), std::string::npos) << m;
  EXPECT_NE(m.find("TICTAC_BACKENDS=verbs,tcp"), std::string::npos) << m;
  // With a fallback listed, the unusable one is skipped and said so.
  Result<BackendPlan> fallback = plan_backends("verbs,tcp");
  ASSERT_TRUE(fallback.ok()) << fallback.status().to_string();
  EXPECT_EQ(fallback->names, std::vector<std::string>{"tcp"});
  ASSERT_EQ(fallback->skipped.size(), 1u);
  EXPECT_EQ(fallback->skipped[0].rfind("verbs: ", 0), 0u);
}

TEST(BackendChoice, GroupCreationFailsClearlyOnAnUnknownBackend) {
  bootstrap::InMemoryStore store;
  auto groups = make_groups(store, {"carrier-pigeon"});
  ASSERT_FALSE(groups[0].ok());
  EXPECT_NE(groups[0].status().message().find("unknown backend 'carrier-pigeon'"),
            std::string::npos)
      << groups[0].status().to_string();
}

}  // namespace
}  // namespace tictac::group
