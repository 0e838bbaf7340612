// InMemoryStore: a Store for peers that are threads of one process (tests, the loopback backend).
//
// Thread safety: all methods are safe to call concurrently; one mutex protects the map and a
// condition variable wakes get()/wait() callers after every set()/add(). Never fails except for
// invalid arguments and timeouts. Not shared across processes (a fork gets an independent copy).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "transport/bootstrap/store.h"

namespace tictac::bootstrap {

class InMemoryStore final : public Store {
 public:
  InMemoryStore() = default;
  InMemoryStore(const InMemoryStore&) = delete;
  InMemoryStore& operator=(const InMemoryStore&) = delete;

  Status set(std::string_view key, std::span<const std::uint8_t> value) override;
  Result<Bytes> get(std::string_view key, Millis timeout) override;
  Status wait(const std::vector<std::string>& keys, Millis timeout) override;
  Result<std::int64_t> add(std::string_view key, std::int64_t delta) override;

 private:
  std::vector<std::string> missing_locked(const std::vector<std::string>& keys) const;

  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Bytes, std::less<>> values_;  // guarded by mu_
};

}  // namespace tictac::bootstrap
