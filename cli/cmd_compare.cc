// `tictac compare`: simulates every policy of all_policies() on one graph and setting and
// prints them side by side: median and p95 iteration time, mean E, speedup over random,
// straggler spread and distance from optimal. Flags and model: docs/simulator.md.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/sim_flags.h"
#include "priority/sim/compare.h"
#include "priority/sim/json_writer.h"

namespace tictac::cli {
namespace {

using priority::sim::CompareResult;
using priority::sim::CompareRow;
using priority::sim::JsonWriter;

void print_table(const SimSetup& s, const CompareResult& r) {
  print_setting(s, nullptr);
  std::printf("\n%-8s %11s %11s %7s %9s %10s %9s %11s\n", "policy", "median ms", "p95 ms", "E", "speedup",
              "spread ms", "max/mean", "vs optimal");
  std::vector<std::string> notes;
  for (const CompareRow& row : r.rows) {
    if (!row.ok) {
      std::printf("%-8s %11s %11s %7s %9s %10s %9s %11s\n", row.policy.c_str(), "n/a", "n/a", "n/a", "n/a", "n/a",
                  "n/a", "n/a");
      notes.push_back(row.policy + ": did not run: " + row.note);
      continue;
    }
    const auto& sm = row.summary;
    std::printf("%-8s %11s %11s %7s %9s %10s %9s %11s\n", row.policy.c_str(), fmt(sm.median_time * 1e3).c_str(),
                fmt(sm.p95_time * 1e3).c_str(), fmt(sm.mean_E).c_str(), fmt(row.speedup_vs_random).c_str(),
                fmt(sm.mean_spread * 1e3).c_str(), fmt(sm.mean_max_over_mean, "%.4f").c_str(),
                fmt(row.distance_to_optimal).c_str());
  }
  std::printf("\nspeedup = median(random) / median(policy); vs optimal = median(policy) / median(optimal);\n"
              "spread = mean over iterations of max-min worker iteration time.\n");
  for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
}

void print_json(const SimSetup& s, const CompareResult& r) {
  JsonWriter j;
  j.begin_object();
  j.key("graph").value(s.graph_path);
  j.key("workers").value(s.config.workers).key("ps").value(s.config.ps);
  j.key("mode").value(to_string(s.config.mode));
  j.key("iterations").value(s.config.iterations);
  j.key("bandwidth_bps").value(s.config.bandwidth_bps);
  j.key("target_ratio");
  if (s.target_ratio.has_value()) {
    j.value(*s.target_ratio);
  } else {
    j.null();
  }
  j.key("serial_ratio").value(s.load.ratio);
  j.key("rows").begin_array();
  for (const CompareRow& row : r.rows) {
    const auto& sm = row.summary;
    j.begin_object().key("policy").value(row.policy).key("ok").value(row.ok);
    if (!row.ok) {
      j.key("note").value(row.note).end_object();
      continue;
    }
    j.key("median_s").value(sm.median_time)
        .key("p95_s").value(sm.p95_time)
        .key("mean_s").value(sm.mean_time)
        .key("variance_s2").value(sm.time_variance)
        .key("E").value(sm.mean_E)
        .key("measured_ratio").value(sm.measured_ratio)
        .key("speedup_vs_random").value(row.speedup_vs_random)
        .key("spread_s").value(sm.mean_spread)
        .key("max_over_mean").value(sm.mean_max_over_mean)
        .key("distance_to_optimal").value(row.distance_to_optimal)
        .end_object();
  }
  j.end_array().end_object();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

int run_compare(Args& args) {
  Result<SimSetup> setup = parse_sim_setup(args);
  if (!setup.ok()) return report("compare", setup.status());
  if (Status st = args.finish(); !st.ok()) return report("compare", st);
  SimSetup& s = *setup;
  if (s.trace_path.has_value()) {
    return report("compare", invalid_argument("--trace is for `tictac simulate` (one policy); compare runs them all"));
  }
  if (Status st = finish_sim_setup(s); !st.ok()) return report("compare", st);
  Progress progress("compare");
  Result<CompareResult> r = priority::sim::compare_policies(
      s.graph, s.config, s.policy_options, [&](std::string_view name, int index, int count, int done, int total) {
        progress.update("policy " + std::string(name) + " (" + std::to_string(index + 1) + "/" +
                        std::to_string(count) + "), iteration " + std::to_string(done) + "/" +
                        std::to_string(total));
      });
  if (!r.ok()) return report("compare", r.status());
  if (s.json) {
    print_json(s, *r);
  } else {
    print_table(s, *r);
  }
  return kExitOk;
}

}  // namespace tictac::cli
