#include "priority/sim/compare.h"

#include <limits>

namespace tictac::priority::sim {

Result<CompareResult> compare_policies(const Graph& graph, const SimConfig& config,
                                       const PolicyOptions& options,
                                       const CompareProgressFn& progress) {
  TICTAC_RETURN_IF_ERROR(validate(config));
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  CompareResult out;
  const auto policies = all_policies();
  const int count = static_cast<int>(policies.size());
  for (int index = 0; index < count; ++index) {
    const PolicyInfo& p = policies[static_cast<std::size_t>(index)];
    if (progress) progress(p.name, index, count, 0, config.iterations);
    CompareRow row;
    row.policy = std::string(p.name);
    row.speedup_vs_random = kNaN;
    row.distance_to_optimal = kNaN;
    Result<Schedule> schedule = p.fn(graph, options);
    if (!schedule.ok()) {
      row.note = schedule.status().message();
      out.rows.push_back(std::move(row));
      continue;
    }
    SimConfig c = config;
    c.shuffle_each_iteration = p.name == "random";
    ProgressFn on_iteration;
    if (progress) {
      on_iteration = [&, index](int done, int total) { progress(p.name, index, count, done, total); };
    }
    Result<SimResult> sim = simulate(graph, *schedule, c, on_iteration);
    if (!sim.ok()) return sim.status().with_context("policy '" + row.policy + "'");
    row.ok = true;
    row.summary = std::move(sim->summary);
    out.rows.push_back(std::move(row));
  }
  const CompareRow* random = nullptr;
  const CompareRow* optimal = nullptr;
  for (const CompareRow& r : out.rows) {
    if (r.ok && r.policy == "random") random = &r;
    if (r.ok && r.policy == "optimal") optimal = &r;
  }
  for (CompareRow& r : out.rows) {
    if (!r.ok) continue;
    if (random != nullptr && r.summary.median_time > 0) {
      r.speedup_vs_random = random->summary.median_time / r.summary.median_time;
    }
    if (optimal != nullptr && optimal->summary.median_time > 0) {
      r.distance_to_optimal = r.summary.median_time / optimal->summary.median_time;
    }
  }
  return out;
}

}  // namespace tictac::priority::sim
