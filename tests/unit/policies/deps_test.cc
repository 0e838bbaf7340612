// analyze_deps against a naive computation of every op's dependency set.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "priority/policies/deps.h"
#include "tests/unit/policies/test_graphs.h"

namespace tictac::priority {
namespace {

using policies::DepSets;

std::vector<std::set<std::uint32_t>> naive_deps(const Graph& g) {
  std::vector<std::set<std::uint32_t>> dep(g.size());
  for (OpId id : g.topo_order()) {
    if (g.is_recv(id)) {
      dep[id] = {static_cast<std::uint32_t>(g.recv_index(id))};
      continue;
    }
    for (OpId in : g.op(id).inputs) dep[id].insert(dep[in].begin(), dep[in].end());
  }
  return dep;
}

TEST(Deps, ClassesMatchNaiveDependencySets) {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    testing::RandomDagOptions o;
    o.recvs = 1 + static_cast<int>(seed % 70);  // crosses the 64-bit word boundary
    o.computes = 5 + static_cast<int>(seed % 30);
    o.shape = static_cast<testing::Shape>(seed % 4);
    o.recv_inputs = true;
    const Graph g = testing::random_dag(seed, o);
    std::vector<std::int64_t> weight(g.recvs().size());
    for (std::size_t r = 0; r < weight.size(); ++r) weight[r] = static_cast<std::int64_t>(r * r + 1);
    Result<DepSets> d = policies::analyze_deps(g, weight);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    const auto dep = naive_deps(g);
    std::map<std::set<std::uint32_t>, std::uint32_t> id_of;
    for (OpId id = 0; id < g.size(); ++id) {
      const std::uint32_t s = d->op_set[id];
      if (dep[id].empty()) {
        EXPECT_EQ(s, DepSets::kNone);
        continue;
      }
      ASSERT_LT(s, d->num_sets());
      EXPECT_EQ(d->size[s], dep[id].size());
      std::uint32_t x = 0;
      std::int64_t w = 0;
      for (std::uint32_t r : dep[id]) {
        x ^= r;
        w += weight[r];
      }
      EXPECT_EQ(d->member_xor[s], x);
      EXPECT_EQ(d->weight[s], w);
      auto [it, fresh] = id_of.emplace(dep[id], s);
      EXPECT_EQ(it->second, s) << "equal sets must share a class";
    }
    // Distinct sets got distinct ids; every set containing r is reachable from {r}.
    std::set<std::uint32_t> ids;
    for (const auto& [set, s] : id_of) ids.insert(s);
    EXPECT_EQ(ids.size(), id_of.size());
    for (std::uint32_t r = 0; r < d->num_recvs; ++r) {
      std::set<std::uint32_t> reach = {r};
      std::vector<std::uint32_t> stack = {r};
      while (!stack.empty()) {
        const std::uint32_t s = stack.back();
        stack.pop_back();
        for (std::uint32_t t : d->successors(s)) {
          if (reach.insert(t).second) stack.push_back(t);
        }
      }
      for (const auto& [set, s] : id_of) {
        EXPECT_EQ(reach.count(s) == 1, set.count(r) == 1) << "recv " << r << " set " << s;
      }
    }
  }
}

TEST(Deps, RecvInputsAreNotLookedThrough) {
  const Graph g = testing::build_or_die({
      testing::recv_op("a", 1), testing::compute_op("ca", {"a"}, 1),
      [] {
        OpSpec s = testing::recv_op("b", 1);
        s.inputs = {"ca"};
        return s;
      }(),
      testing::compute_op("cb", {"b"}, 1),
  });
  Result<DepSets> d = policies::analyze_deps(g);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->op_set[*g.find("cb")], 1u);  // {b}, not {a, b}
  EXPECT_EQ(d->size[1], 1u);
}

TEST(Deps, RejectsWrongWeightCount) {
  const Graph g = testing::ab_graph();
  const std::vector<std::int64_t> w = {1};
  Result<DepSets> d = policies::analyze_deps(g, w);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::invalid_argument);
}

TEST(Deps, TimesArePicoseconds) {
  const Graph g = testing::build_or_die({testing::recv_bytes("w", 1250), testing::compute_op("c", {"w"}, 2.5e-9)});
  Result<std::vector<std::int64_t>> ps = policies::op_times_ps(g, 1e12);
  ASSERT_TRUE(ps.ok());
  EXPECT_EQ((*ps)[0], 10000);  // 10000 bits at 1e12 bit/s = 10 ns
  EXPECT_EQ((*ps)[1], 2500);  // 2.5 ns
  EXPECT_FALSE(policies::op_times_ps(g, -1).ok());
  EXPECT_FALSE(policies::op_times_ps(g, std::numeric_limits<double>::infinity()).ok());
}

}  // namespace
}  // namespace tictac::priority
