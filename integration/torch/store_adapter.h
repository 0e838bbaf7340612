// StoreAdapter: torch's c10d::Store (the prefixed store c10d hands each backend) behind the
// project's bootstrap::Store, so the rank mesh exchanges addresses through it. c10d errors
// become `unavailable`/`timeout` Statuses carrying torch's message. Thread-safe as c10d's store.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "transport/bootstrap/store.h"

namespace tictac::torch_adapter {

class StoreAdapter final : public bootstrap::Store {
 public:
  explicit StoreAdapter(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  Status set(std::string_view key, std::span<const std::uint8_t> value) override {
    try {
      store_->set(std::string(key), std::vector<std::uint8_t>(value.begin(), value.end()));
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status(StatusCode::unavailable, "store set '" + std::string(key) + "': " + e.what());
    }
  }

  Result<bootstrap::Bytes> get(std::string_view key, bootstrap::Millis timeout) override {
    Status waited = wait({std::string(key)}, timeout);
    if (!waited.ok()) return waited;
    try {
      return store_->get(std::string(key));
    } catch (const std::exception& e) {
      return Status(StatusCode::unavailable, "store get '" + std::string(key) + "': " + e.what());
    }
  }

  Status wait(const std::vector<std::string>& keys, bootstrap::Millis timeout) override {
    try {
      store_->wait(keys, timeout);
      return Status::Ok();
    } catch (const std::exception& e) {
      std::string names;
      for (const std::string& k : keys) names += (names.empty() ? "" : ", ") + k;
      return Status(StatusCode::timeout, "store wait for " + names + " (" +
                                             std::to_string(timeout.count()) + " ms): " + e.what());
    }
  }

  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override {
    try {
      return store_->add(std::string(key), delta);
    } catch (const std::exception& e) {
      return Status(StatusCode::unavailable, "store add '" + std::string(key) + "': " + e.what());
    }
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace tictac::torch_adapter
