#include "integration/tf/rendezvous/transfer_log.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

namespace tictac::tfrdv {
namespace {

struct Record {
  std::int64_t step_id, start_us, end_us, bytes;
  std::string edge;
};

std::mutex g_mu;
std::vector<Record> g_records;  // guarded by g_mu

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag = [] {
    const char* v = std::getenv("TICTAC_TF_TRANSFER_LOG");
    return v != nullptr && std::string(v) == "1";
  }();
  return flag;
}

}  // namespace

bool transfer_log_enabled() { return enabled_flag().load(std::memory_order_relaxed); }

void set_transfer_log(bool on) { enabled_flag().store(on); }

void record_transfer(std::int64_t step_id, const std::string& edge, std::int64_t start_us,
                     std::int64_t end_us, std::int64_t bytes) {
  if (!transfer_log_enabled()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_records.push_back({step_id, start_us, end_us, bytes, edge});
}

long long dump_transfer_log(const std::string& path) {
  std::vector<Record> taken;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    taken.swap(g_records);
  }
  std::ofstream out(path);
  for (const Record& r : taken)
    out << r.step_id << ' ' << r.start_us << ' ' << r.end_us << ' ' << r.bytes << ' ' << r.edge << '\n';
  out.flush();
  if (!out) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_records.insert(g_records.begin(), taken.begin(), taken.end());
    return -1;
  }
  return static_cast<long long>(taken.size());
}

}  // namespace tictac::tfrdv
