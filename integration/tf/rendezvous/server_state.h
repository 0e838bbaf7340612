// ServerState: what one grpc+tictac server's parts share (TF-free): the TicTac channel, where
// every task of the cluster listens for TicTac fetches, and the priority of each rendezvous
// edge this task receives (from TIC on its registered graphs). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "integration/tf/rendezvous/tensor_channel.h"

namespace tictac::tfrdv {

// Priority for keys no registered graph named: after every known one.
inline constexpr std::int64_t kUnknownPriority = std::int64_t{1} << 40;

class ServerState {
 public:
  std::string own_task;                    // "/job:J/replica:0/task:T"
  std::unique_ptr<TensorChannel> channel;  // set once before the server starts

  // Task -> "tcp://host:port" (the task's gRPC port plus the offset); replaced on cluster updates.
  void set_addresses(std::map<std::string, std::string> addresses) {
    std::lock_guard<std::mutex> lock(mu_);
    addresses_ = std::move(addresses);
  }
  // "" when the task is not in the cluster.
  std::string address_of(const std::string& task) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = addresses_.find(task);
    return it == addresses_.end() ? std::string() : it->second;
  }

  // Replaces the priorities of the edges in `table` (edge name = _Recv's tensor_name).
  void merge_priorities(const std::unordered_map<std::string, std::int64_t>& table) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, v] : table) priorities_[k] = v;
  }
  std::int64_t priority(const std::string& edge) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = priorities_.find(edge);
    return it == priorities_.end() ? kUnknownPriority : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::int64_t> priorities_;
  std::map<std::string, std::string> addresses_;
};

}  // namespace tictac::tfrdv
