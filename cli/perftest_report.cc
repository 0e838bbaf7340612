#include "cli/perftest_report.h"

#include <algorithm>
#include <cmath>

#include "priority/sim/json_writer.h"

namespace tictac::cli::perftest {

void Report::add(const std::string& key, const std::string& value) { fields_.emplace_back(key, value); }
void Report::add(const std::string& key, std::uint64_t value) { fields_.emplace_back(key, value); }
void Report::add(const std::string& key, double value) { fields_.emplace_back(key, value); }
void Report::add(const std::string& key, bool value) { fields_.emplace_back(key, value); }
void Report::note(const std::string& text) { notes_.push_back(text); }

namespace {

std::string show(const std::variant<std::string, std::uint64_t, double, bool>& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* u = std::get_if<std::uint64_t>(&v)) return std::to_string(*u);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", std::get<double>(v));
  return buf;
}

}  // namespace

void Report::print(PerfFormat format, std::FILE* out) const {
  if (format == PerfFormat::json) {
    priority::sim::JsonWriter w;
    w.begin_object();
    for (const auto& [key, v] : fields_) {
      w.key(key);
      if (const auto* s = std::get_if<std::string>(&v)) {
        w.value(std::string_view(*s));
      } else if (const auto* u = std::get_if<std::uint64_t>(&v)) {
        w.value(*u);
      } else if (const auto* b = std::get_if<bool>(&v)) {
        w.value(*b);
      } else {
        w.value(std::get<double>(v));
      }
    }
    if (!notes_.empty()) {
      w.key("notes").begin_array();
      for (const std::string& n : notes_) w.value(std::string_view(n));
      w.end_array();
    }
    w.end_object();
    std::fprintf(out, "%s\n", w.str().c_str());
    return;
  }
  std::size_t width = 0;
  for (const auto& f : fields_) width = std::max(width, f.first.size());
  for (const auto& [key, v] : fields_) {
    std::fprintf(out, "  %-*s  %s\n", static_cast<int>(width), key.c_str(), show(v).c_str());
  }
  for (const std::string& n : notes_) std::fprintf(out, "note: %s\n", n.c_str());
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const std::size_t index = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

}  // namespace tictac::cli::perftest
