#include "priority/sim/sizing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace tictac::priority::sim {

std::vector<double> recv_sizes(const Graph& graph, const SimConfig& config) {
  const double ref = config.size_reference_bps > 0 ? config.size_reference_bps : config.bandwidth_bps;
  std::vector<double> bytes;
  bytes.reserve(graph.recvs().size());
  for (OpId id : graph.recvs()) {
    const Op& op = graph.op(id);
    bytes.push_back(op.bytes.has_value() ? static_cast<double>(*op.bytes) : op.time.value_or(0) * ref / 8);
  }
  return bytes;
}

std::vector<int> shard_by_bytes(std::span<const double> bytes, int ps) {
  std::vector<int> order(bytes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return bytes[a] > bytes[b]; });
  std::vector<double> load(static_cast<std::size_t>(std::max(ps, 1)), 0.0);
  std::vector<int> shard(bytes.size(), 0);
  for (int r : order) {
    const auto k = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    shard[r] = k;
    load[k] += bytes[r];
  }
  return shard;
}

SerialLoad serial_load(const Graph& graph, const SimConfig& config) {
  const std::vector<double> bytes = recv_sizes(graph, config);
  const std::vector<int> shard = shard_by_bytes(bytes, config.ps);
  const LinkRates rates = link_rates(config);
  std::vector<double> per_ps(static_cast<std::size_t>(config.ps), 0.0);
  double total = 0;
  for (std::size_t r = 0; r < bytes.size(); ++r) {
    per_ps[shard[r]] += bytes[r];
    total += bytes[r];
  }
  const double W = config.workers;
  auto busiest = [&](const std::vector<double>& worker_rates, const std::vector<double>& ps_rates) {
    double t = 0;
    for (double r : worker_rates) t = std::max(t, total * 8 / r);
    for (std::size_t k = 0; k < per_ps.size(); ++k) t = std::max(t, W * per_ps[k] * 8 / ps_rates[k]);
    return t;
  };
  SerialLoad s;
  s.pull_s = busiest(rates.worker_down, rates.ps_up);
  const bool training = config.mode == SimMode::training;
  if (training) s.push_s = busiest(rates.worker_up, rates.ps_down);
  s.comm_s = s.pull_s + s.push_s;
  double forward = 0;
  for (OpId id = 0; id < graph.size(); ++id) {
    if (!graph.is_recv(id)) forward += graph.op(id).time.value_or(0);
  }
  s.compute_s = training ? forward * (1 + config.backward_factor) : forward;
  s.ratio = s.compute_s > 0 ? s.comm_s / s.compute_s : std::numeric_limits<double>::quiet_NaN();
  s.effective_worker_bps = s.pull_s > 0 ? total * 8 / s.pull_s : config.bandwidth_bps;
  return s;
}

Result<SimConfig> calibrate_to_ratio(const Graph& graph, SimConfig config, double target) {
  if (!std::isfinite(target) || target <= 0) {
    return invalid_argument("target ratio must be a finite number > 0 (comm/compute, e.g. 1.0), got " +
                            std::to_string(target));
  }
  TICTAC_RETURN_IF_ERROR(validate(config));
  if (config.size_reference_bps == 0) config.size_reference_bps = config.bandwidth_bps;
  const SerialLoad load = serial_load(graph, config);
  if (!(load.compute_s > 0)) {
    return invalid_argument("cannot calibrate to a comm/compute ratio: the graph's compute ops take no time");
  }
  if (!(load.comm_s > 0)) {
    return invalid_argument("cannot calibrate to a comm/compute ratio: the graph's recvs transfer no bytes");
  }
  // Transfer times scale as 1/bandwidth, so one factor on every link hits the target exactly.
  const double factor = load.ratio / target;
  config.bandwidth_bps *= factor;
  for (std::vector<double>* list :
       {&config.worker_down_bps, &config.worker_up_bps, &config.ps_up_bps, &config.ps_down_bps}) {
    for (double& r : *list) r *= factor;
  }
  return config;
}

}  // namespace tictac::priority::sim
