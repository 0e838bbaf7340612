// Simulation flags and output helpers shared by `tictac simulate` and `tictac compare`
// (header-only so both commands use one definition without another build target).
//
// parse_sim_setup reads every simulation flag from Args (see docs/simulator.md for the list),
// loads the graph, validates the config and applies --target-ratio; errors are invalid_argument
// Statuses naming the flag (exit code 2). Progress prints to stderr only once a run has taken
// more than a second. Not thread-safe (writes to stdio).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "common/tunables.h"
#include "priority/graph.h"
#include "priority/graph_json.h"
#include "priority/schedule.h"
#include "priority/sim/sim_config.h"
#include "priority/sim/sizing.h"

namespace tictac::cli {

// "10e9", "10G", "2.5Gbit", "100Mbps", "1e9bit/s": bits per second, decimal prefixes.
inline Result<double> parse_bandwidth(std::string_view text) {
  std::string s(text);
  for (const char* unit : {"bit/s", "bps", "b/s", "bit"}) {
    const std::string u(unit);
    if (s.size() > u.size() && s.compare(s.size() - u.size(), u.size(), u) == 0) {
      s.resize(s.size() - u.size());
      break;
    }
  }
  double scale = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'k': case 'K': scale = 1e3; break;
      case 'M': scale = 1e6; break;
      case 'G': scale = 1e9; break;
      case 'T': scale = 1e12; break;
      default: break;
    }
    if (scale != 1) s.pop_back();
  }
  Result<double> v = parse_double(s);
  if (!v.ok() || *v <= 0) {
    return invalid_argument("expected a bandwidth in bits/s > 0 such as 10e9, 10G or 2.5Gbit, got '" +
                            std::string(text) + "'");
  }
  return *v * scale;
}

// Seconds: "0.0005", "1e-4", "500us", "2ms", "1s".
inline Result<double> parse_seconds(std::string_view text) {
  Result<double> plain = parse_double(text);
  if (plain.ok()) return *plain;
  Result<std::chrono::nanoseconds> d = parse_duration(text);
  if (!d.ok()) {
    return invalid_argument("expected seconds such as 0.0005, 1e-4, 500us or 2ms, got '" + std::string(text) + "'");
  }
  return static_cast<double>(d->count()) * 1e-9;
}

// One value for all links, or a comma-separated list with one value per worker/PS.
inline Status bandwidth_list(Args& args, const std::string& name, std::vector<double>& out) {
  std::optional<std::string> v = args.get(name);
  if (!v.has_value()) return Status::Ok();
  if (v->empty()) return invalid_argument("--" + name + " needs a value");
  std::size_t pos = 0;
  while (pos <= v->size()) {
    const std::size_t comma = std::min(v->find(',', pos), v->size());
    Result<double> bps = parse_bandwidth(std::string_view(*v).substr(pos, comma - pos));
    if (!bps.ok()) return bps.status().with_context("--" + name);
    out.push_back(*bps);
    pos = comma + 1;
  }
  return Status::Ok();
}

inline Result<int> int_flag(Args& args, const std::string& name, int def, int lo, int hi) {
  Result<std::int64_t> v = args.get_int(name, def);
  if (!v.ok()) return v.status();
  if (*v < lo || *v > hi) {
    return invalid_argument("--" + name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "], got " + std::to_string(*v));
  }
  return static_cast<int>(*v);
}

struct SimSetup {
  std::string graph_path;
  priority::Graph graph;
  priority::sim::SimConfig config;      // after calibration
  double requested_bandwidth_bps = 0;   // --bandwidth as given (before calibration)
  std::optional<double> target_ratio;   // --target-ratio
  priority::sim::SerialLoad load;       // at the final bandwidths
  priority::PolicyOptions policy_options;
  std::optional<std::string> trace_path;
  bool json = false;
};

// Expands a single value given to a per-link flag to the number of workers/PSs.
inline void expand(std::vector<double>& list, int n) {
  if (list.size() == 1 && n > 1) list.assign(static_cast<std::size_t>(n), list[0]);
}

inline Result<SimSetup> parse_sim_setup(Args& args) {
  SimSetup s;
  priority::sim::SimConfig& c = s.config;
  std::optional<std::string> graph = args.get("graph");
  if (!graph.has_value() || graph->empty()) return invalid_argument("--graph G.json is required");
  s.graph_path = *graph;

  Result<int> workers = int_flag(args, "workers", 1, 1, 4096);
  if (!workers.ok()) return workers.status();
  c.workers = *workers;
  Result<int> ps = int_flag(args, "ps", 1, 1, 4096);
  if (!ps.ok()) return ps.status();
  c.ps = *ps;
  if (std::optional<std::string> bw = args.get("bandwidth"); bw.has_value()) {
    Result<double> v = parse_bandwidth(*bw);
    if (!v.ok()) return v.status().with_context("--bandwidth");
    c.bandwidth_bps = *v;
  }
  s.requested_bandwidth_bps = c.bandwidth_bps;
  TICTAC_RETURN_IF_ERROR(bandwidth_list(args, "worker-down", c.worker_down_bps));
  TICTAC_RETURN_IF_ERROR(bandwidth_list(args, "worker-up", c.worker_up_bps));
  TICTAC_RETURN_IF_ERROR(bandwidth_list(args, "ps-up", c.ps_up_bps));
  TICTAC_RETURN_IF_ERROR(bandwidth_list(args, "ps-down", c.ps_down_bps));
  expand(c.worker_down_bps, c.workers);
  expand(c.worker_up_bps, c.workers);
  expand(c.ps_up_bps, c.ps);
  expand(c.ps_down_bps, c.ps);
  if (std::optional<std::string> lat = args.get("latency"); lat.has_value()) {
    Result<double> v = parse_seconds(*lat);
    if (!v.ok()) return v.status().with_context("--latency");
    c.latency_s = *v;
  }
  Result<std::uint64_t> chunk = args.get_size("chunk", 0);
  if (!chunk.ok()) return chunk.status();
  c.chunk_bytes = *chunk;
  Result<int> window = int_flag(args, "window", 1, 1, 1 << 20);
  if (!window.ok()) return window.status();
  c.window = *window;
  const std::string mode = args.get_or("mode", "inference");
  if (mode == "inference") {
    c.mode = priority::sim::SimMode::inference;
  } else if (mode == "training") {
    c.mode = priority::sim::SimMode::training;
  } else {
    return invalid_argument("--mode must be inference or training, got '" + mode + "'");
  }
  Result<double> bf = args.get_double("backward-factor", c.backward_factor);
  if (!bf.ok()) return bf.status();
  c.backward_factor = *bf;
  Result<double> upd = args.get_double("update-time-per-byte", c.update_time_per_byte);
  if (!upd.ok()) return upd.status();
  c.update_time_per_byte = *upd;
  Result<int> iterations = int_flag(args, "iterations", 10, 1, 1000000);
  if (!iterations.ok()) return iterations.status();
  c.iterations = *iterations;
  Result<double> jitter = args.get_double("jitter", 0);
  if (!jitter.ok()) return jitter.status();
  c.jitter = *jitter;
  Result<std::int64_t> seed = args.get_int("seed", 1);
  if (!seed.ok()) return seed.status();
  c.seed = static_cast<std::uint64_t>(*seed);
  if (args.get("target-ratio").has_value()) {
    Result<double> a = args.get_double("target-ratio", 1);
    if (!a.ok()) return a.status();
    if (!(*a > 0)) return invalid_argument("--target-ratio must be > 0 (comm/compute, e.g. 1.0)");
    s.target_ratio = *a;
  }
  s.trace_path = args.get("trace");
  if (s.trace_path.has_value() && s.trace_path->empty()) return invalid_argument("--trace needs a file path");
  c.record_timeline = s.trace_path.has_value();
  const std::string format = args.get_or("format", "table");
  if (format != "table" && format != "json") {
    return invalid_argument("--format must be table or json, got '" + format + "'");
  }
  s.json = format == "json";
  return s;
}

// After all flags were read (so typos are reported first): load the graph, validate, calibrate.
inline Status finish_sim_setup(SimSetup& s) {
  Status config_ok = priority::sim::validate(s.config);
  if (!config_ok.ok()) return config_ok;
  Result<priority::Graph> g = priority::load_graph_file(s.graph_path);
  if (!g.ok()) return g.status();
  s.graph = std::move(g).value();
  if (s.target_ratio.has_value()) {
    Result<priority::sim::SimConfig> cal = priority::sim::calibrate_to_ratio(s.graph, s.config, *s.target_ratio);
    if (!cal.ok()) return cal.status().with_context("--target-ratio");
    s.config = std::move(cal).value();
  }
  s.load = priority::sim::serial_load(s.graph, s.config);
  // TAC's oracle: a recv given in bytes costs bytes * 8 / (a worker's share of the network).
  s.policy_options.bandwidth_bps = s.load.effective_worker_bps;
  s.policy_options.seed = s.config.seed;
  return Status::Ok();
}

// Prints progress to stderr, but only once the run has taken more than a second, and at most
// once a second after that.
class Progress {
 public:
  explicit Progress(const char* command) : command_(command), start_(std::chrono::steady_clock::now()) {}
  void update(const std::string& what) {
    const auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) || now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "tictac %s: %s (%.1f s)\n", command_, what.c_str(), s);
  }

 private:
  const char* command_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_{};
};

// "1.23 Gbit/s"
inline std::string format_bandwidth(double bps) {
  const char* unit = "bit/s";
  double v = bps;
  if (bps >= 1e12) { v = bps / 1e12; unit = "Tbit/s"; }
  else if (bps >= 1e9) { v = bps / 1e9; unit = "Gbit/s"; }
  else if (bps >= 1e6) { v = bps / 1e6; unit = "Mbit/s"; }
  else if (bps >= 1e3) { v = bps / 1e3; unit = "kbit/s"; }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g %s", v, unit);
  return buf;
}

// Fixed-width number, "n/a" for NaN.
inline std::string fmt(double v, const char* spec = "%.3f") {
  if (std::isnan(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

// The setting, as the header lines of a table.
inline void print_setting(const SimSetup& s, const char* policy) {
  const auto& c = s.config;
  double total = 0;
  for (double b : priority::sim::recv_sizes(s.graph, c)) total += b;
  std::printf("graph   %s: %zu ops, %zu recvs, %.2f MiB of parameters\n", s.graph_path.c_str(), s.graph.size(),
              s.graph.recvs().size(), total / (1 << 20));
  std::printf("setting %s%s%sW=%d workers, K=%d PS, %d iterations, seed %llu\n", policy ? "policy " : "",
              policy ? policy : "", policy ? ", " : "", c.workers, c.ps, c.iterations,
              static_cast<unsigned long long>(c.seed));
  std::printf("        mode %s, latency %g s, %s, window %d, jitter %g\n", std::string(to_string(c.mode)).c_str(),
              c.latency_s, c.chunk_bytes == 0 ? "unchunked" : (std::string("chunks of ") + std::to_string(c.chunk_bytes) + " B").c_str(),
              c.window, c.jitter);
  const bool overrides = !c.worker_down_bps.empty() || !c.worker_up_bps.empty() || !c.ps_up_bps.empty() ||
                         !c.ps_down_bps.empty();
  std::printf("network %s per link%s", format_bandwidth(c.bandwidth_bps).c_str(),
              overrides ? " (with per-link overrides)" : "");
  if (s.target_ratio.has_value()) {
    std::printf(", calibrated from %s for a = %.3g", format_bandwidth(s.requested_bandwidth_bps).c_str(),
                *s.target_ratio);
  }
  std::printf("\n        serial comm/compute a = %.3f (busiest link %.3f ms + push %.3f ms vs compute %.3f ms)\n",
              s.load.ratio, s.load.pull_s * 1e3, s.load.push_s * 1e3, s.load.compute_s * 1e3);
}

}  // namespace tictac::cli
