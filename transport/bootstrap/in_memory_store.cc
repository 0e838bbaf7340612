#include "transport/bootstrap/in_memory_store.h"

namespace tictac::bootstrap {

Status InMemoryStore::set(std::string_view key, std::span<const std::uint8_t> value) {
  TICTAC_RETURN_IF_ERROR(validate_key(key));
  TICTAC_RETURN_IF_ERROR(validate_value_size(value.size()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_.insert_or_assign(std::string(key), Bytes(value.begin(), value.end()));
  }
  changed_.notify_all();
  return Status::Ok();
}

Result<Bytes> InMemoryStore::get(std::string_view key, Millis timeout) {
  TICTAC_RETURN_IF_ERROR(validate_key(key));
  timeout = clamp_timeout(timeout);
  std::unique_lock<std::mutex> lock(mu_);
  auto it = values_.end();
  const bool found = changed_.wait_for(lock, timeout, [&] {
    it = values_.find(key);
    return it != values_.end();
  });
  if (!found) return missing_keys_timeout("in-memory store get", timeout, {std::string(key)});
  return it->second;
}

std::vector<std::string> InMemoryStore::missing_locked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (values_.find(key) == values_.end()) missing.push_back(key);
  }
  return missing;
}

Status InMemoryStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  TICTAC_RETURN_IF_ERROR(validate_wait_keys(keys));
  timeout = clamp_timeout(timeout);
  std::unique_lock<std::mutex> lock(mu_);
  const bool all = changed_.wait_for(lock, timeout, [&] { return missing_locked(keys).empty(); });
  if (!all) return missing_keys_timeout("in-memory store wait", timeout, missing_locked(keys));
  return Status::Ok();
}

Result<std::int64_t> InMemoryStore::add(std::string_view key, std::int64_t delta) {
  TICTAC_RETURN_IF_ERROR(validate_key(key));
  std::int64_t next = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::int64_t current = 0;
    auto it = values_.find(key);
    if (it != values_.end()) {
      Result<std::int64_t> parsed = parse_counter(key, it->second);
      if (!parsed.ok()) return parsed.status();
      current = *parsed;
    }
    Result<std::int64_t> sum = checked_add(key, current, delta);
    if (!sum.ok()) return sum.status();
    next = *sum;
    values_.insert_or_assign(std::string(key), encode_counter(next));
  }
  changed_.notify_all();
  return next;
}

}  // namespace tictac::bootstrap
