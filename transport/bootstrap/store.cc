#include "transport/bootstrap/store.h"

#include <algorithm>
#include <charconv>

namespace tictac::bootstrap {

Status Store::set_string(std::string_view key, std::string_view text) {
  return set(key, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(text.data()),
                                                text.size()));
}

Result<std::string> Store::get_string(std::string_view key, Millis timeout) {
  Result<Bytes> value = get(key, timeout);
  if (!value.ok()) return value.status();
  return std::string(value->begin(), value->end());
}

Millis clamp_timeout(Millis timeout) { return std::clamp(timeout, Millis(0), kMaxTimeout); }

std::string printable_key(std::string_view key) {
  constexpr std::size_t kShown = 96;
  std::string out;
  static const char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < key.size() && i < kShown; ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (key.size() > kShown) out += "...(" + std::to_string(key.size()) + " bytes)";
  return out;
}

Status validate_key(std::string_view key) {
  if (key.empty()) return invalid_argument("store key is empty; use a non-empty name such as \"addr/0\"");
  if (key.size() > kMaxKeyBytes) {
    return invalid_argument("store key '" + printable_key(key) + "' is " + std::to_string(key.size()) +
                            " bytes, more than the limit of " + std::to_string(kMaxKeyBytes));
  }
  return Status::Ok();
}

Status validate_value_size(std::size_t size) {
  if (size > kMaxValueBytes) {
    return invalid_argument("store value of " + std::to_string(size) + " bytes exceeds the limit of " +
                            std::to_string(kMaxValueBytes) + " bytes; store a path or address instead");
  }
  return Status::Ok();
}

Status validate_wait_keys(const std::vector<std::string>& keys) {
  if (keys.size() > kMaxWaitKeys) {
    return invalid_argument("wait() on " + std::to_string(keys.size()) + " keys exceeds the limit of " +
                            std::to_string(kMaxWaitKeys) + "; wait in batches");
  }
  for (const std::string& key : keys) TICTAC_RETURN_IF_ERROR(validate_key(key));
  return Status::Ok();
}

Status missing_keys_timeout(std::string_view what, Millis timeout,
                            const std::vector<std::string>& missing) {
  std::string msg(what);
  msg += ": timed out after " + std::to_string(timeout.count()) + " ms waiting for key";
  msg += missing.size() == 1 ? ": " : "s: ";
  constexpr std::size_t kListed = 16;
  for (std::size_t i = 0; i < missing.size() && i < kListed; ++i) {
    if (i > 0) msg += ", ";
    msg += printable_key(missing[i]);
  }
  if (missing.size() > kListed) msg += " and " + std::to_string(missing.size() - kListed) + " more";
  msg += " (has the peer that sets them started?)";
  return Status(StatusCode::timeout, std::move(msg));
}

Result<std::int64_t> parse_counter(std::string_view key, std::span<const std::uint8_t> value) {
  const char* begin = reinterpret_cast<const char*>(value.data());
  const char* end = begin + value.size();
  std::int64_t out = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, out);
  if (value.empty() || ec != std::errc() || ptr != end) {
    return invalid_argument("add() on key '" + printable_key(key) +
                            "' whose value is not a decimal counter; use a separate key for counters");
  }
  return out;
}

Bytes encode_counter(std::int64_t value) {
  const std::string text = std::to_string(value);
  return Bytes(text.begin(), text.end());
}

Result<std::int64_t> checked_add(std::string_view key, std::int64_t current, std::int64_t delta) {
  std::int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return invalid_argument("add(" + std::to_string(delta) + ") on key '" + printable_key(key) +
                            "' overflows the 64-bit counter at " + std::to_string(current));
  }
  return sum;
}

}  // namespace tictac::bootstrap
