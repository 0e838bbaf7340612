#include "priority/sim/sim_config.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace tictac::priority::sim {
namespace {

std::string num(double v);

Status check_rate(const char* field, double bps) {
  if (!std::isfinite(bps) || bps <= 0) {
    return invalid_argument(std::string(field) + " must be a finite bandwidth > 0 bits/s, got " +
                            num(bps));
  }
  return Status::Ok();
}

Status check_list(const char* field, const std::vector<double>& rates, int expected,
                  const char* per) {
  if (rates.empty()) return Status::Ok();
  if (static_cast<int>(rates.size()) != expected) {
    return invalid_argument(std::string(field) + " lists " + std::to_string(rates.size()) +
                            " bandwidths but there are " + std::to_string(expected) + " " + per +
                            "; give one value for all or exactly one per " + per);
  }
  for (double r : rates) TICTAC_RETURN_IF_ERROR(check_rate(field, r));
  return Status::Ok();
}

Status check_nonneg(const char* field, double v) {
  if (!std::isfinite(v) || v < 0) {
    return invalid_argument(std::string(field) + " must be a finite number >= 0, got " +
                            num(v));
  }
  return Status::Ok();
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::vector<double> resolve(const std::vector<double>& over, int n, double def) {
  return over.empty() ? std::vector<double>(static_cast<std::size_t>(n), def) : over;
}

}  // namespace

std::string_view to_string(SimMode mode) {
  return mode == SimMode::inference ? "inference" : "training";
}

Status validate(const SimConfig& c) {
  if (c.workers < 1) return invalid_argument("workers must be >= 1, got " + std::to_string(c.workers));
  if (c.ps < 1) return invalid_argument("ps (parameter servers) must be >= 1, got " + std::to_string(c.ps));
  if (c.iterations < 1) {
    return invalid_argument("iterations must be >= 1, got " + std::to_string(c.iterations));
  }
  if (c.window < 1) return invalid_argument("window must be >= 1 chunk, got " + std::to_string(c.window));
  TICTAC_RETURN_IF_ERROR(check_rate("bandwidth", c.bandwidth_bps));
  TICTAC_RETURN_IF_ERROR(check_list("worker downlink", c.worker_down_bps, c.workers, "worker"));
  TICTAC_RETURN_IF_ERROR(check_list("worker uplink", c.worker_up_bps, c.workers, "worker"));
  TICTAC_RETURN_IF_ERROR(check_list("ps uplink", c.ps_up_bps, c.ps, "ps"));
  TICTAC_RETURN_IF_ERROR(check_list("ps downlink", c.ps_down_bps, c.ps, "ps"));
  if (c.size_reference_bps != 0) TICTAC_RETURN_IF_ERROR(check_rate("size reference bandwidth", c.size_reference_bps));
  TICTAC_RETURN_IF_ERROR(check_nonneg("latency", c.latency_s));
  TICTAC_RETURN_IF_ERROR(check_nonneg("backward factor", c.backward_factor));
  TICTAC_RETURN_IF_ERROR(check_nonneg("update time per byte", c.update_time_per_byte));
  if (!std::isfinite(c.jitter) || c.jitter < 0 || c.jitter >= 1) {
    return invalid_argument("jitter must be in [0, 1) (a fraction of each transfer's duration), got " +
                            num(c.jitter));
  }
  return Status::Ok();
}

LinkRates link_rates(const SimConfig& c) {
  LinkRates r;
  r.worker_down = resolve(c.worker_down_bps, c.workers, c.bandwidth_bps);
  r.worker_up = resolve(c.worker_up_bps, c.workers, c.bandwidth_bps);
  r.ps_up = resolve(c.ps_up_bps, c.ps, c.bandwidth_bps);
  r.ps_down = resolve(c.ps_down_bps, c.ps, c.bandwidth_bps);
  return r;
}

}  // namespace tictac::priority::sim
