// Peak memory of TAC on the largest benchmark graph: generates make_layered(ops, ops / 100),
// reports peak RSS (getrusage) after generation and after TAC, and the wall time of each.
//   build/bench/tac_rss [ops]      (default 1000000)
// Exit 0 on success, 1 when generation or TAC fails, 2 on a bad argument.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "priority/generators.h"
#include "priority/policies/tac.h"

namespace {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux: KiB
}

// Current resident set from /proc/self/statm (Linux), in MiB; 0 when unavailable.
double current_rss_mib() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20) : 0;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int ops = 1000000;
  if (argc > 1) {
    char* end = nullptr;
    const long v = std::strtol(argv[1], &end, 10);
    if (*end != '\0' || v < 200 || v > 100000000) {
      std::fprintf(stderr, "tac_rss: ops must be an integer in [200, 1e8], got '%s'\n", argv[1]);
      return 2;
    }
    ops = static_cast<int>(v);
  }
  auto start = std::chrono::steady_clock::now();
  tictac::Result<tictac::priority::Graph> g = tictac::priority::make_layered(ops, ops / 100, 1);
  if (!g.ok()) {
    std::fprintf(stderr, "tac_rss: %s\n", g.status().to_string().c_str());
    return 1;
  }
  const double gen_s = seconds_since(start);
  const double gen_rss = peak_rss_mib();
  const double before_rss = current_rss_mib();
  tictac::priority::policies::TacStats stats;
  start = std::chrono::steady_clock::now();
  auto s = tictac::priority::policies::tac_policy_with_stats(
      *g, {}, tictac::priority::policies::kDefaultDepBitsetBytes, &stats);
  const double tac_s = seconds_since(start);
  if (!s.ok()) {
    std::fprintf(stderr, "tac_rss: %s\n", s.status().to_string().c_str());
    return 1;
  }
  std::printf("ops %d recvs %zu: generate %.2f s (peak RSS %.0f MiB, %.0f MiB resident after); "
              "tac %.2f s, process peak RSS %.0f MiB "
              "(sets %zu, set edges %zu, pick visits %llu, M+ updates %llu, boundary visits %llu, "
              "tie candidates %llu)\n",
              ops, g->recvs().size(), gen_s, gen_rss, before_rss, tac_s, peak_rss_mib(), stats.sets,
              stats.set_edges, static_cast<unsigned long long>(stats.pick_visits),
              static_cast<unsigned long long>(stats.mplus_updates),
              static_cast<unsigned long long>(stats.boundary_visits),
              static_cast<unsigned long long>(stats.tie_candidates));
  return 0;
}
