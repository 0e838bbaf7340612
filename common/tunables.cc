#include "common/tunables.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <mutex>

namespace tictac {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<TunableInfo>& registry() {
  static std::vector<TunableInfo> r;
  return r;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// Splits "123abc" into the number part and the suffix; number must be non-empty.
bool split_number(std::string_view s, std::string_view& num, std::string_view& suffix) {
  size_t i = 0;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.')) ++i;
  num = s.substr(0, i);
  suffix = s.substr(i);
  return !num.empty();
}

}  // namespace

std::vector<TunableInfo> registered_tunables() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<TunableInfo> all = {
      {"TICTAC_LOG_LEVEL", "warn", "log level: error|warn|info|debug|trace (read by common/log.cc)"},
      {"TICTAC_DEBUG", "0", "1 = shorthand for TICTAC_LOG_LEVEL=debug"},
  };
  all.insert(all.end(), registry().begin(), registry().end());
  return all;
}

void register_tunable(TunableInfo info) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const TunableInfo& t : registry()) {
    if (t.name == info.name) return;  // declared in a header included twice: keep one
  }
  registry().push_back(std::move(info));
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

Status tunable_parse_error(const char* name, std::string_view value, const Status& why) {
  return invalid_argument(std::string(name) + "='" + std::string(value) + "' is invalid: " +
                          why.message() + " (unset it to use the default)");
}

Result<std::int64_t> parse_int(std::string_view text) {
  text = trim(text);
  if (text.empty()) return invalid_argument("expected an integer, got an empty string");
  std::string s(text);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0') {
    return invalid_argument("expected an integer such as 42, got '" + s + "'");
  }
  return static_cast<std::int64_t>(v);
}

Result<double> parse_double(std::string_view text) {
  text = trim(text);
  std::string s(text);
  if (s.empty()) return invalid_argument("expected a number, got an empty string");
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !std::isfinite(v)) {
    return invalid_argument("expected a finite number such as 1.5 or 10e9, got '" + s + "'");
  }
  return v;
}

Result<std::uint64_t> parse_size(std::string_view text) {
  text = trim(text);
  std::string_view num, suffix;
  if (!split_number(text, num, suffix) || num.find('.') != std::string_view::npos) {
    return invalid_argument("expected a byte count such as 65536, 64K, 1M or 2G, got '" +
                            std::string(text) + "'");
  }
  std::uint64_t mult = 1;
  std::string suf(suffix);
  if (suf == "" || suf == "B") mult = 1;
  else if (suf == "K" || suf == "k" || suf == "KiB" || suf == "KB") mult = 1ull << 10;
  else if (suf == "M" || suf == "MiB" || suf == "MB") mult = 1ull << 20;
  else if (suf == "G" || suf == "GiB" || suf == "GB") mult = 1ull << 30;
  else {
    return invalid_argument("unknown size suffix '" + suf + "' in '" + std::string(text) +
                            "'; use K, M or G");
  }
  errno = 0;
  const std::string n(num);
  const unsigned long long v = std::strtoull(n.c_str(), nullptr, 10);
  if (errno != 0 || (mult > 1 && v > UINT64_MAX / mult)) {
    return invalid_argument("size '" + std::string(text) + "' is too large");
  }
  return static_cast<std::uint64_t>(v) * mult;
}

Result<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  text = trim(text);
  std::string_view num, suffix;
  if (!split_number(text, num, suffix)) {
    return invalid_argument("expected a duration such as 30s, 500ms or 2m, got '" +
                            std::string(text) + "'");
  }
  Result<double> v = parse_double(num);
  if (!v.ok()) return v.status();
  double scale = 1e9;
  const std::string suf(suffix);
  if (suf == "" || suf == "s") scale = 1e9;
  else if (suf == "ms") scale = 1e6;
  else if (suf == "us") scale = 1e3;
  else if (suf == "ns") scale = 1;
  else if (suf == "m" || suf == "min") scale = 60e9;
  else {
    return invalid_argument("unknown duration unit '" + suf + "' in '" + std::string(text) +
                            "'; use ns, us, ms, s or m");
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(*v * scale));
}

Result<bool> parse_bool(std::string_view text) {
  const std::string s(trim(text));
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return invalid_argument("expected 1/0, true/false, yes/no or on/off, got '" + s + "'");
}

}  // namespace tictac
