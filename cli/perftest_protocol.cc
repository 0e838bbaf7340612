#include "cli/perftest_protocol.h"

#include <chrono>
#include <fstream>


namespace tictac::cli::perftest {
namespace {

// Concatenation by appending (GCC 12's -Wrestrict misfires on chains of operator+).
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

template <typename... Parts>
Status bad(const Parts&... parts) {
  return Status(StatusCode::protocol_error, cat("perftest peer sent a bad control message: ", parts...));
}

bool plain(std::string_view s) { return s.find_first_of(" =") == std::string_view::npos; }

}  // namespace

Fields& Fields::set(const std::string& key, const std::string& value) {
  if (values_.count(key) == 0) order_.push_back(key);
  values_[key] = value;
  return *this;
}

Fields& Fields::set(const std::string& key, std::uint64_t value) { return set(key, std::to_string(value)); }

std::string Fields::encode() const {
  std::string out;
  for (const std::string& k : order_) {
    if (!out.empty()) out += ' ';
    out += cat(k, "=", values_.at(k));
  }
  return out;
}

Result<Fields> Fields::decode(std::string_view text) {
  if (text.size() > kMaxControlBytes) return bad("longer than ", std::to_string(kMaxControlBytes), " bytes");
  Fields f;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view pair = text.substr(pos, end - pos);
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0) return bad("'", pair.substr(0, 64), "' is not key=value");
    const std::string key(pair.substr(0, eq));
    const std::string value(pair.substr(eq + 1));
    if (!plain(value)) return bad("value of '", key, "' contains '='");
    for (char c : pair) {
      if (c < 0x21 || c > 0x7e) return bad("non-printable byte in '", key, "'");
    }
    if (f.has(key)) return bad("duplicate key '", key, "'");
    f.set(key, value);
    pos = end + 1;
  }
  return f;
}

Result<std::string> Fields::text(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return bad("missing '", key, "'");
  return it->second;
}

Result<std::uint64_t> Fields::number(const std::string& key) const {
  Result<std::string> t = text(key);
  if (!t.ok()) return t.status();
  if (t->empty() || t->find_first_not_of("0123456789") != std::string::npos || t->size() > 19) {
    return bad("'", key, "=", *t, "' is not a decimal number");
  }
  return std::stoull(*t);
}

Result<std::vector<std::uint64_t>> Fields::numbers(const std::string& key, std::size_t max_items) const {
  Result<std::string> t = text(key);
  if (!t.ok()) return t.status();
  std::vector<std::uint64_t> out;
  std::size_t pos = 0;
  while (pos <= t->size()) {
    std::size_t end = t->find(',', pos);
    if (end == std::string::npos) end = t->size();
    const std::string item = t->substr(pos, end - pos);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 19) {
      return bad("'", key, "' is not a list of decimal numbers");
    }
    out.push_back(std::stoull(item));
    if (out.size() > max_items) return bad("'", key, "' has more than ", std::to_string(max_items), " items");
    pos = end + 1;
  }
  return out;
}

std::string join_numbers(const std::vector<std::uint64_t>& values) {
  std::string out;
  for (std::uint64_t v : values) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return out;
}

std::string clock_identity() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id) || !plain(id)) return "unknown";
  return id;
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

}  // namespace tictac::cli::perftest
