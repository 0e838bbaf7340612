// TAC scaling benchmark: the incremental TAC on make_layered graphs from 10^3 to 10^6 ops
// (recvs = ops / 100), and the reference TAC on the small sizes for the speedup ratio.
//   build/bench/tac_bench                      full run (the 10^6 case takes a few seconds)
//   build/bench/tac_bench --benchmark_filter='/1000$'   the smoke configuration
// Graphs are generated once per size, outside the timed region.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>

#include "priority/generators.h"
#include "priority/policies/tac.h"
#include "priority/policies/tac_reference.h"

namespace {

using tictac::priority::Graph;

const Graph& layered(int ops) {
  static std::map<int, std::unique_ptr<Graph>> cache;
  auto it = cache.find(ops);
  if (it == cache.end()) {
    tictac::Result<Graph> g = tictac::priority::make_layered(ops, ops / 100, 1);
    if (!g.ok()) {
      std::fprintf(stderr, "make_layered(%d): %s\n", ops, g.status().to_string().c_str());
      std::abort();
    }
    it = cache.emplace(ops, std::make_unique<Graph>(std::move(g).value())).first;
  }
  return *it->second;
}

void BM_TacIncremental(benchmark::State& state) {
  const Graph& g = layered(static_cast<int>(state.range(0)));
  tictac::priority::policies::TacStats stats;
  for (auto _ : state) {
    auto s = tictac::priority::policies::tac_policy_with_stats(
        g, {}, tictac::priority::policies::kDefaultDepBitsetBytes, &stats);
    if (!s.ok()) state.SkipWithError(s.status().to_string().c_str());
    benchmark::DoNotOptimize(s);
  }
  state.SetComplexityN(state.range(0));
  state.counters["recvs"] = static_cast<double>(g.recvs().size());
  state.counters["sets"] = static_cast<double>(stats.sets);
  state.counters["pick_visits"] = static_cast<double>(stats.pick_visits);
  state.counters["mplus_updates"] = static_cast<double>(stats.mplus_updates);
  state.counters["tie_candidates"] = static_cast<double>(stats.tie_candidates);
  state.counters["ns_per_op"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * static_cast<double>(state.range(0)),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TacIncremental)
    ->RangeMultiplier(10)
    ->Range(1000, 1000000)
    ->Unit(benchmark::kMillisecond)
    ->Complexity();

void BM_TacReference(benchmark::State& state) {
  const Graph& g = layered(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto s = tictac::priority::policies::tac_reference_policy(g, {});
    if (!s.ok()) state.SkipWithError(s.status().to_string().c_str());
    benchmark::DoNotOptimize(s);
  }
  state.SetComplexityN(state.range(0));
}
BENCHMARK(BM_TacReference)->RangeMultiplier(10)->Range(1000, 10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
