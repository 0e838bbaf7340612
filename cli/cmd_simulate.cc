// `tictac simulate`: simulates iterations of one policy's order on a graph and prints the
// paper's metrics per worker (N, C, U, L, m, E, S, iteration time) and the straggler spread.
// Flags and model: docs/simulator.md.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/sim_flags.h"
#include "priority/sim/json_writer.h"
#include "priority/sim/simulator.h"
#include "priority/sim/trace.h"

namespace tictac::cli {
namespace {

using priority::sim::JsonWriter;
using priority::sim::SimResult;

void print_table(const SimSetup& s, const std::string& policy, const SimResult& r) {
  print_setting(s, policy.c_str());
  std::printf("        measured N/C = %.3f (mean over workers and iterations)\n\n", r.summary.measured_ratio);
  std::printf("%6s %10s %10s %10s %10s %10s %6s %6s %10s\n", "worker", "N ms", "C ms", "U ms", "L ms", "m ms",
              "E", "S", "iter ms");
  for (std::size_t w = 0; w < r.summary.workers.size(); ++w) {
    const auto& ws = r.summary.workers[w];
    std::printf("%6zu %10s %10s %10s %10s %10s %6s %6s %10s\n", w, fmt(ws.N * 1e3).c_str(), fmt(ws.C * 1e3).c_str(),
                fmt(ws.U * 1e3).c_str(), fmt(ws.L * 1e3).c_str(), fmt(ws.m * 1e3).c_str(), fmt(ws.E).c_str(),
                fmt(ws.S).c_str(), fmt(ws.time * 1e3).c_str());
  }
  const auto& sm = r.summary;
  std::printf("\niteration time  mean %s ms, median %s ms, p95 %s ms, variance %s ms^2\n",
              fmt(sm.mean_time * 1e3).c_str(), fmt(sm.median_time * 1e3).c_str(), fmt(sm.p95_time * 1e3).c_str(),
              fmt(sm.time_variance * 1e6, "%.4g").c_str());
  std::printf("efficiency      mean E %s (undefined iterations skipped)\n", fmt(sm.mean_E).c_str());
  std::printf("straggler       max-min %s ms, max/mean %s (means over iterations)\n",
              fmt(sm.mean_spread * 1e3).c_str(), fmt(sm.mean_max_over_mean, "%.4f").c_str());
}

void write_setting(JsonWriter& j, const SimSetup& s) {
  const auto& c = s.config;
  j.key("graph").value(s.graph_path);
  j.key("ops").value(static_cast<std::uint64_t>(s.graph.size()));
  j.key("recvs").value(static_cast<std::uint64_t>(s.graph.recvs().size()));
  j.key("config").begin_object()
      .key("workers").value(c.workers)
      .key("ps").value(c.ps)
      .key("bandwidth_bps").value(c.bandwidth_bps)
      .key("latency_s").value(c.latency_s)
      .key("chunk_bytes").value(static_cast<std::uint64_t>(c.chunk_bytes))
      .key("window").value(c.window)
      .key("mode").value(to_string(c.mode))
      .key("backward_factor").value(c.backward_factor)
      .key("update_time_per_byte").value(c.update_time_per_byte)
      .key("iterations").value(c.iterations)
      .key("jitter").value(c.jitter)
      .key("seed").value(static_cast<std::uint64_t>(c.seed))
      .end_object();
  j.key("calibration").begin_object();
  j.key("target_ratio");
  if (s.target_ratio.has_value()) {
    j.value(*s.target_ratio);
  } else {
    j.null();
  }
  j.key("requested_bandwidth_bps").value(s.requested_bandwidth_bps)
      .key("bandwidth_bps").value(c.bandwidth_bps)
      .key("serial_ratio").value(s.load.ratio)
      .key("serial_comm_s").value(s.load.comm_s)
      .key("serial_compute_s").value(s.load.compute_s)
      .end_object();
}

void print_json(const SimSetup& s, const std::string& policy, const SimResult& r) {
  JsonWriter j;
  j.begin_object().key("policy").value(policy);
  write_setting(j, s);
  const auto& sm = r.summary;
  j.key("measured_ratio").value(sm.measured_ratio);
  j.key("workers").begin_array();
  for (std::size_t w = 0; w < sm.workers.size(); ++w) {
    const auto& ws = sm.workers[w];
    j.begin_object()
        .key("worker").value(static_cast<std::uint64_t>(w))
        .key("N_s").value(ws.N).key("C_s").value(ws.C).key("U_s").value(ws.U).key("L_s").value(ws.L)
        .key("m_s").value(ws.m).key("E").value(ws.E).key("S").value(ws.S)
        .key("iteration_time_s").value(ws.time)
        .end_object();
  }
  j.end_array();
  j.key("iteration_time_s").begin_object()
      .key("mean").value(sm.mean_time).key("median").value(sm.median_time).key("p95").value(sm.p95_time)
      .key("variance").value(sm.time_variance)
      .end_object();
  j.key("iterations_s").begin_array();
  for (const auto& it : r.iterations) j.value(it.time);
  j.end_array();
  j.key("mean_E").value(sm.mean_E);
  j.key("straggler").begin_object()
      .key("spread_s").value(sm.mean_spread).key("max_over_mean").value(sm.mean_max_over_mean)
      .end_object();
  j.end_object();
  std::printf("%s\n", j.str().c_str());
}

}  // namespace

int run_simulate(Args& args) {
  Result<SimSetup> setup = parse_sim_setup(args);
  if (!setup.ok()) return report("simulate", setup.status());
  const std::optional<std::string> policy_name = args.get("policy");
  if (Status st = args.finish(); !st.ok()) return report("simulate", st);
  if (!policy_name.has_value() || policy_name->empty()) {
    return report("simulate", invalid_argument("--policy is required; one of " + priority::policy_names()));
  }
  const priority::PolicyInfo* policy = priority::find_policy(*policy_name);
  if (policy == nullptr) {
    return report("simulate", invalid_argument("unknown --policy '" + *policy_name + "'; use one of " +
                                               priority::policy_names()));
  }
  SimSetup& s = *setup;
  if (Status st = finish_sim_setup(s); !st.ok()) return report("simulate", st);
  Result<priority::Schedule> schedule = policy->fn(s.graph, s.policy_options);
  if (!schedule.ok()) return report("simulate", schedule.status().with_context("policy " + *policy_name));
  s.config.shuffle_each_iteration = policy->name == "random";
  Progress progress("simulate");
  Result<SimResult> r = priority::sim::simulate(s.graph, *schedule, s.config, [&](int done, int total) {
    progress.update("iteration " + std::to_string(done) + "/" + std::to_string(total));
  });
  if (!r.ok()) return report("simulate", r.status());
  if (s.trace_path.has_value()) {
    if (Status st = priority::sim::write_chrome_trace(*r, s.config, *s.trace_path); !st.ok()) {
      return report("simulate", st);
    }
  }
  if (s.json) {
    print_json(s, *policy_name, *r);
  } else {
    print_table(s, *policy_name, *r);
    if (s.trace_path.has_value()) std::printf("trace           %s\n", s.trace_path->c_str());
  }
  return kExitOk;
}

}  // namespace tictac::cli
