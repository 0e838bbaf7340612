// TICTAC_* environment tunables, each declared once beside its reader with a default and help.
//
//   inline const tictac::SizeTunable kChunkBytes{"TICTAC_CHUNK_BYTES", 1 << 20, "bytes per chunk"};
//   Result<uint64_t> chunk = kChunkBytes.get();
//
// get() reads the environment on every call (cheap; callers cache at construction time) and
// returns invalid_argument naming the variable, the bad value and the accepted form, so a typo
// is never silently replaced by the default. Every declared tunable registers itself so that
// `tictac info` can list name, default, current value and help. Thread-safe after static init.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tictac {

struct TunableInfo {
  std::string name;
  std::string default_text;
  std::string help;
};

// All tunables declared so far in this process (those in linked, initialised translation units).
std::vector<TunableInfo> registered_tunables();
void register_tunable(TunableInfo info);

// Parsers, also used by CLI flags. Sizes accept "4096", "64K", "64KiB", "1M", "2G" (powers of 2).
Result<std::uint64_t> parse_size(std::string_view text);
Result<std::int64_t> parse_int(std::string_view text);
Result<double> parse_double(std::string_view text);
// Durations: "30" (seconds), "30s", "500ms", "250us", "2m".
Result<std::chrono::nanoseconds> parse_duration(std::string_view text);
// Booleans: 1/0, true/false, yes/no, on/off.
Result<bool> parse_bool(std::string_view text);

template <typename T, Result<T> (*Parse)(std::string_view)>
class Tunable {
 public:
  Tunable(const char* name, T default_value, const char* help, std::string default_text)
      : name_(name), default_(default_value) {
    register_tunable(TunableInfo{name, std::move(default_text), help});
  }
  const char* name() const { return name_; }
  T default_value() const { return default_; }
  // The environment's value, the default when unset or empty, or an error naming the variable.
  Result<T> get() const;

 private:
  const char* name_;
  T default_;
};

// Reads an environment variable; empty string when unset.
std::string env_or_empty(const char* name);
Status tunable_parse_error(const char* name, std::string_view value, const Status& why);

template <typename T, Result<T> (*Parse)(std::string_view)>
Result<T> Tunable<T, Parse>::get() const {
  const std::string value = env_or_empty(name_);
  if (value.empty()) return default_;
  Result<T> parsed = Parse(value);
  if (!parsed.ok()) return tunable_parse_error(name_, value, parsed.status());
  return parsed;
}

class SizeTunable : public Tunable<std::uint64_t, parse_size> {
 public:
  SizeTunable(const char* name, std::uint64_t def, const char* help)
      : Tunable(name, def, help, std::to_string(def)) {}
};
class IntTunable : public Tunable<std::int64_t, parse_int> {
 public:
  IntTunable(const char* name, std::int64_t def, const char* help)
      : Tunable(name, def, help, std::to_string(def)) {}
};
class DoubleTunable : public Tunable<double, parse_double> {
 public:
  DoubleTunable(const char* name, double def, const char* help)
      : Tunable(name, def, help, std::to_string(def)) {}
};
class BoolTunable : public Tunable<bool, parse_bool> {
 public:
  BoolTunable(const char* name, bool def, const char* help)
      : Tunable(name, def, help, def ? "1" : "0") {}
};
// Free text; get() never fails (the reader validates and names the variable itself).
inline Result<std::string> parse_string_value(std::string_view text) { return std::string(text); }
class StringTunable : public Tunable<std::string, parse_string_value> {
 public:
  StringTunable(const char* name, const char* def, const char* help)
      : Tunable(name, def, help, std::string("\"") + def + "\"") {}
};
class DurationTunable : public Tunable<std::chrono::nanoseconds, parse_duration> {
 public:
  DurationTunable(const char* name, std::chrono::nanoseconds def, const char* help, const char* def_text)
      : Tunable(name, def, help, def_text) {}
};

}  // namespace tictac
