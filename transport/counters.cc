// describe_counters (transport/counters.h).
#include "transport/counters.h"

#include <sstream>

namespace tictac::transport {
namespace {

// 1024 -> "1K", 3 -> "3": the size classes' bounds.
std::string short_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"", "K", "M", "G"};
  int unit = 0;
  while (unit < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + kUnits[unit];
}

}  // namespace

std::string describe_counters(const TransportCounters& c) {
  std::ostringstream os;
  auto field = [&os](const char* name, const std::atomic<std::uint64_t>& v) {
    os << name << '=' << v.load(std::memory_order_relaxed) << ' ';
  };
  field("readies_sent", c.readies_sent);
  field("claimed_received", c.claimed_received);
  field("tcp_lanes_up", c.tcp_lanes_up);
  field("tcp_lane1_frames", c.tcp_lane1_frames);
  field("tcp_lane_switches", c.tcp_lane_switches);
  field("tcp_lane_barrier_waits", c.tcp_lane_barrier_waits);
  os << "tcp_lane_barrier_wait_ms="
     << static_cast<double>(c.tcp_lane_barrier_wait_ns.load(std::memory_order_relaxed)) / 1e6
     << " data_frames=";
  bool any = false;
  for (int k = 0; k < TransportCounters::kSizeClasses; ++k) {
    const std::uint64_t n = c.data_frames_by_log2[k].load(std::memory_order_relaxed);
    if (n == 0) continue;
    os << (any ? "," : "") << '[' << short_size(std::uint64_t{1} << k) << '-'
       << short_size(std::uint64_t{1} << (k + 1)) << ")B:" << n;
    any = true;
  }
  if (!any) os << "none";
  return os.str();
}

}  // namespace tictac::transport
