// A small, strict JSON (RFC 8259) reader and writer helpers, written for tictac's file formats.
//
// json::parse builds a tree of Values; every Value remembers the line and column (1-based,
// columns count bytes) where it starts, so format loaders can point at the offending field.
// Strict: no comments, no trailing commas, no leading zeros, no NaN/Infinity, control characters
// in strings must be escaped, strings must be valid UTF-8, \u escapes must pair surrogates,
// duplicate keys in one object are an error, and numbers that overflow a double are an error.
// Nesting deeper than ParseOptions::max_depth is an error (hostile input cannot overflow the
// stack). Errors are invalid_argument Statuses: "line L, column C: <what>".
// Values are plain data: thread-safe to read; parse() itself has no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tictac::json {

enum class Type : std::uint8_t { null, boolean, number, string, array, object };
std::string_view to_string(Type type);  // "null", "boolean", "number", ...

struct Member;

class Value {
 public:
  Value() = default;

  Type type() const { return type_; }
  int line() const { return line_; }
  int column() const { return column_; }
  // "line L, column C"
  std::string where() const;

  bool is_null() const { return type_ == Type::null; }
  bool is_bool() const { return type_ == Type::boolean; }
  bool is_number() const { return type_ == Type::number; }
  bool is_string() const { return type_ == Type::string; }
  bool is_array() const { return type_ == Type::array; }
  bool is_object() const { return type_ == Type::object; }

  // Accessors for the matching type; on another type they return a neutral value
  // (false, 0, empty), so callers check the type first.
  bool as_bool() const { return bool_; }
  double as_number() const { return number_; }
  // The number exactly as written in the source (e.g. "1e6", "18446744073709551615").
  const std::string& number_text() const { return type_ == Type::number ? text_ : empty_string(); }
  // The number as an exact unsigned integer, when it is one (e.g. "3", "3.0", "1e6"; not "-1",
  // "2.5" or anything above 2^64 - 1).
  std::optional<std::uint64_t> as_uint64() const;
  const std::string& as_string() const { return type_ == Type::string ? text_ : empty_string(); }
  const std::vector<Value>& items() const { return items_; }
  const std::vector<Member>& members() const { return members_; }
  // The member with this key, or nullptr (objects only; keys are unique).
  const Value* find(std::string_view key) const;

 private:
  friend class Parser;
  static const std::string& empty_string();

  Type type_ = Type::null;
  bool bool_ = false;
  int line_ = 0;
  int column_ = 0;
  double number_ = 0;
  std::string text_;  // string contents, or the number's source text
  std::vector<Value> items_;
  std::vector<Member> members_;
};

struct Member {
  std::string key;
  int line = 0;  // where the key starts
  int column = 0;
  Value value;
};

struct ParseOptions {
  int max_depth = 256;  // arrays/objects nested deeper than this are rejected
};

// Parses one JSON text (a single value with optional surrounding whitespace).
Result<Value> parse(std::string_view text, const ParseOptions& options = {});

// Writer helpers.
// Appends `s` as a JSON string literal (with quotes), escaping '"', '\\' and control
// characters; other bytes are copied as they are (callers pass UTF-8).
void append_quoted(std::string& out, std::string_view s);
std::string quoted(std::string_view s);
// The shortest decimal text that parses back to exactly `v`. `v` must be finite (JSON has no
// NaN or infinity); a non-finite value is a caller bug and aborts.
std::string format_double(double v);

}  // namespace tictac::json
