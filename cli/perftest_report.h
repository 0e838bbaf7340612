// A perftest result: ordered named figures, printed as a small table for people or as ONE JSON
// object for scripts (--format json), plus the statistics the tests need. Not thread-safe; plain
// value.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "cli/perftest_options.h"

namespace tictac::cli::perftest {

class Report {
 public:
  void add(const std::string& key, const std::string& value);
  void add(const std::string& key, const char* value) { add(key, std::string(value)); }
  void add(const std::string& key, std::uint64_t value);
  void add(const std::string& key, double value);
  void add(const std::string& key, bool value);
  // A human note, printed under the table (and as "notes" in JSON).
  void note(const std::string& text);

  void print(PerfFormat format, std::FILE* out) const;

 private:
  using Value = std::variant<std::string, std::uint64_t, double, bool>;
  std::vector<std::pair<std::string, Value>> fields_;
  std::vector<std::string> notes_;
};

// The q-quantile (0..1) of `values` by the nearest-rank method; 0 for an empty vector.
double quantile(std::vector<double> values, double q);
double mean(const std::vector<double>& values);

}  // namespace tictac::cli::perftest
