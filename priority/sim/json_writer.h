// JsonWriter: a small streaming JSON writer for the simulator's outputs (Chrome traces, the
// CLI's --format json). Produces compact, valid JSON: strings are escaped by common/json.h,
// numbers use 9 significant digits, non-finite numbers become null. The caller nests
// begin/end calls correctly; keys are only written inside objects. Not thread-safe; owns its buffer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tictac::priority::sim {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(double d);
  JsonWriter& value(std::int64_t i);
  JsonWriter& value(int i) { return value(static_cast<std::int64_t>(i)); }
  JsonWriter& value(std::uint64_t u);
  JsonWriter& value(bool b);
  JsonWriter& null();
  // Raw newline between array elements, to keep long arrays readable; JSON-neutral.
  JsonWriter& newline();

  const std::string& str() const { return out_; }

 private:
  void separate();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

}  // namespace tictac::priority::sim
