#include "common/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <deque>
#include <iterator>
#include <unordered_set>

#include "common/check.h"

namespace tictac::json {
namespace {

// A number's lexeme split into decimal digits without leading zeros and the position of the
// decimal point relative to them: value = 0.<digits> * 10^point, as an integer when
// `point >= digits.size()`. All-zero numbers have empty digits.
struct Decimal {
  bool negative = false;
  std::string digits;
  std::int64_t point = 0;
};

Decimal decompose(std::string_view lexeme) {
  Decimal d;
  std::size_t i = 0;
  if (i < lexeme.size() && lexeme[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::int64_t int_digits = 0;
  bool seen_point = false;
  for (; i < lexeme.size() && lexeme[i] != 'e' && lexeme[i] != 'E'; ++i) {
    const char c = lexeme[i];
    if (c == '.') {
      seen_point = true;
      continue;
    }
    if (d.digits.empty() && c == '0') {
      if (seen_point) --int_digits;  // leading fraction zero shifts the point left
      continue;
    }
    d.digits.push_back(c);
    if (!seen_point) ++int_digits;
  }
  std::int64_t exponent = 0;
  if (i < lexeme.size()) {
    ++i;
    bool neg = false;
    if (i < lexeme.size() && (lexeme[i] == '+' || lexeme[i] == '-')) neg = lexeme[i++] == '-';
    for (; i < lexeme.size(); ++i) {
      if (exponent < 1'000'000'000) exponent = exponent * 10 + (lexeme[i] - '0');
    }
    if (neg) exponent = -exponent;
  }
  while (!d.digits.empty() && d.digits.back() == '0') d.digits.pop_back();
  d.point = int_digits + exponent;
  return d;
}

std::string describe_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "byte 0x%02x", u);
  return buf;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options) : s_(text), opt_(options) {}

  Result<Value> run() {
    skip_ws();
    Value v;
    TICTAC_RETURN_IF_ERROR(parse_value(v, 0));
    skip_ws();
    if (pos_ < s_.size()) {
      return error("unexpected " + describe_byte(s_[pos_]) + " after the JSON value");
    }
    return v;
  }

 private:
  int line() const { return line_; }
  int column() const { return static_cast<int>(pos_ - line_start_) + 1; }

  Status error(const std::string& what) const { return error_at(line(), column(), what); }
  static Status error_at(int line, int column, const std::string& what) {
    return invalid_argument("line " + std::to_string(line) + ", column " + std::to_string(column) +
                            ": " + what);
  }

  void skip_ws() {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '\n') {
        ++pos_;
        ++line_;
        line_start_ = pos_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  Status parse_value(Value& v, int depth) {
    v.line_ = line();
    v.column_ = column();
    if (pos_ >= s_.size()) return error("unexpected end of input; expected a value");
    const char c = s_[pos_];
    switch (c) {
      case '{':
      case '[':
        if (depth >= opt_.max_depth) {
          return error("arrays and objects nested deeper than " + std::to_string(opt_.max_depth) +
                       " levels");
        }
        return c == '{' ? parse_object(v, depth + 1) : parse_array(v, depth + 1);
      case '"':
        v.type_ = Type::string;
        return parse_string(v.text_);
      case 't':
        v.type_ = Type::boolean;
        v.bool_ = true;
        return literal("true");
      case 'f':
        v.type_ = Type::boolean;
        return literal("false");
      case 'n':
        return literal("null");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(v);
        return error("unexpected " + describe_byte(c) + "; expected a value");
    }
  }

  Status literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) {
      return error("invalid literal; expected '" + std::string(word) + "'");
    }
    pos_ += word.size();
    return Status::Ok();
  }

  bool digit_at(std::size_t p) const { return p < s_.size() && s_[p] >= '0' && s_[p] <= '9'; }

  Status parse_number(Value& v) {
    const std::size_t start = pos_;
    std::size_t p = pos_;
    if (s_[p] == '-') ++p;
    if (!digit_at(p)) {
      pos_ = p;
      return error("a '-' must be followed by digits");
    }
    if (s_[p] == '0' && digit_at(p + 1)) {
      pos_ = p;
      return error("leading zeros are not allowed in numbers");
    }
    while (digit_at(p)) ++p;
    if (p < s_.size() && s_[p] == '.') {
      ++p;
      if (!digit_at(p)) {
        pos_ = p;
        return error("a '.' in a number must be followed by digits");
      }
      while (digit_at(p)) ++p;
    }
    if (p < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
      ++p;
      if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
      if (!digit_at(p)) {
        pos_ = p;
        return error("an exponent in a number must have digits");
      }
      while (digit_at(p)) ++p;
    }
    const std::string_view lexeme = s_.substr(start, p - start);
    double d = 0;
    const auto r = std::from_chars(lexeme.data(), lexeme.data() + lexeme.size(), d);
    if (r.ec == std::errc::result_out_of_range) {
      const Decimal dec = decompose(lexeme);
      if (dec.point > 0)
        return error("number " + std::string(lexeme) + " is too large for a double");
      d = dec.negative ? -0.0 : 0.0;  // underflow: closer to zero than any double
    } else if (r.ec != std::errc() || r.ptr != lexeme.data() + lexeme.size()) {
      return error("malformed number");
    }
    v.type_ = Type::number;
    v.number_ = d;
    v.text_ = std::string(lexeme);
    pos_ = p;
    return Status::Ok();
  }

  Status hex4(std::uint32_t& out) {
    out = 0;
    for (int k = 0; k < 4; ++k) {
      if (pos_ >= s_.size()) return error("unexpected end of input in a \\u escape");
      const char c = s_[pos_];
      std::uint32_t nib;
      if (c >= '0' && c <= '9') {
        nib = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        nib = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        nib = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        return error("\\u must be followed by 4 hex digits, got " + describe_byte(c));
      }
      out = out * 16 + nib;
      ++pos_;
    }
    return Status::Ok();
  }

  // Validates one UTF-8 sequence starting at pos_ (a byte >= 0x80) and copies it to out.
  Status utf8_sequence(std::string& out) {
    const auto b0 = static_cast<unsigned char>(s_[pos_]);
    int len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3;
      if (b0 == 0xE0) lo = 0xA0;
      if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4;
      if (b0 == 0xF0) lo = 0x90;
      if (b0 == 0xF4) hi = 0x8F;
    } else {
      return error("invalid UTF-8 " + describe_byte(s_[pos_]) + " in string");
    }
    for (int k = 1; k < len; ++k) {
      if (pos_ + k >= s_.size()) return error("truncated UTF-8 sequence in string");
      const auto b = static_cast<unsigned char>(s_[pos_ + k]);
      const unsigned char min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
      if (b < min || b > max) return error("invalid UTF-8 sequence in string");
    }
    out.append(s_.substr(pos_, static_cast<std::size_t>(len)));
    pos_ += static_cast<std::size_t>(len);
    return Status::Ok();
  }

  Status parse_string(std::string& out) {
    ++pos_;  // opening quote
    while (true) {
      if (pos_ >= s_.size()) return error("unexpected end of input inside a string");
      const char c = s_[pos_];
      const auto u = static_cast<unsigned char>(c);
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (u < 0x20) {
        return error("control character " + describe_byte(c) +
                     " inside a string; escape it (e.g. \\n, \\t, \\u0001)");
      }
      if (u >= 0x80) {
        TICTAC_RETURN_IF_ERROR(utf8_sequence(out));
        continue;
      }
      if (c != '\\') {
        // Copy the run of plain ASCII characters in one go.
        std::size_t end = pos_ + 1;
        while (end < s_.size()) {
          const auto b = static_cast<unsigned char>(s_[end]);
          if (b == '"' || b == '\\' || b < 0x20 || b >= 0x80) break;
          ++end;
        }
        out.append(s_.substr(pos_, end - pos_));
        pos_ = end;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return error("unexpected end of input in an escape");
      const char e = s_[pos_];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          ++pos_;
          std::uint32_t cp;
          TICTAC_RETURN_IF_ERROR(hex4(cp));
          if (cp >= 0xDC00 && cp <= 0xDFFF) {
            pos_ -= 6;
            return error("\\u escape is a low surrogate without a preceding high surrogate");
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") {
              return error("high surrogate \\u escape must be followed by a \\u low surrogate");
            }
            pos_ += 2;
            std::uint32_t low;
            TICTAC_RETURN_IF_ERROR(hex4(low));
            if (low < 0xDC00 || low > 0xDFFF) {
              pos_ -= 6;
              return error("high surrogate \\u escape must be followed by a \\u low surrogate");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          continue;  // pos_ already past the escape
        }
        default:
          return error(
              "invalid escape '\\" + std::string(1, e) + "'" +
              (static_cast<unsigned char>(e) < 0x20 || static_cast<unsigned char>(e) >= 0x7f
                   ? " (" + describe_byte(e) + ")"
                   : std::string()));
      }
      ++pos_;
    }
  }

  Status parse_array(Value& v, int depth) {
    v.type_ = Type::array;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return Status::Ok();
    }
    // Items collect in a per-depth scratch vector that keeps its capacity, then move into an
    // exactly-sized vector: no memory is left over in the tree.
    std::vector<Value>& items = scratch(item_scratch_, depth);
    items.clear();
    while (true) {
      skip_ws();
      items.emplace_back();
      TICTAC_RETURN_IF_ERROR(parse_value(items.back(), depth));
      skip_ws();
      if (pos_ >= s_.size())
        return error("unexpected end of input; expected ',' or ']' in an array");
      if (s_[pos_] == ']') {
        ++pos_;
        v.items_.assign(std::make_move_iterator(items.begin()),
                        std::make_move_iterator(items.end()));
        items.clear();
        return Status::Ok();
      }
      if (s_[pos_] != ',') {
        return error("unexpected " + describe_byte(s_[pos_]) + "; expected ',' or ']' in an array");
      }
      ++pos_;
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ']') return error("trailing comma before ']'");
    }
  }

  template <typename T>
  static std::vector<T>& scratch(std::deque<std::vector<T>>& per_depth, int depth) {
    while (per_depth.size() <= static_cast<std::size_t>(depth)) per_depth.emplace_back();
    return per_depth[static_cast<std::size_t>(depth)];
  }

  Status check_duplicate(const std::vector<Member>& m) const {
    const Member& last = m.back();
    for (std::size_t i = 0; i + 1 < m.size(); ++i) {
      if (m[i].key == last.key) {
        return error_at(last.line, last.column,
                        "duplicate key " + json::quoted(last.key) + " (first at line " +
                            std::to_string(m[i].line) + ", column " + std::to_string(m[i].column) +
                            ")");
      }
    }
    return Status::Ok();
  }

  Status parse_object(Value& v, int depth) {
    v.type_ = Type::object;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return Status::Ok();
    }
    // Small objects (the common case) check duplicates linearly as they go; big ones keep an
    // index of keys so hostile input cannot make this quadratic.
    constexpr std::size_t kLinearLimit = 16;
    std::unordered_set<std::string> keys;
    std::vector<Member>& members = scratch(member_scratch_, depth);
    members.clear();
    while (true) {
      skip_ws();
      if (pos_ >= s_.size()) return error("unexpected end of input; expected a key in an object");
      if (s_[pos_] != '"') {
        return error("unexpected " + describe_byte(s_[pos_]) +
                     "; expected a string key in an object");
      }
      Member& m = members.emplace_back();
      m.line = line();
      m.column = column();
      TICTAC_RETURN_IF_ERROR(parse_string(m.key));
      if (members.size() <= kLinearLimit) {
        TICTAC_RETURN_IF_ERROR(check_duplicate(members));
        if (members.size() == kLinearLimit) {
          for (const Member& k : members) keys.insert(k.key);
        }
      } else if (!keys.insert(m.key).second) {
        TICTAC_RETURN_IF_ERROR(check_duplicate(members));  // finds the first one and reports it
      }
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') {
        return error(pos_ >= s_.size()
                         ? "unexpected end of input; expected ':' after a key"
                         : "unexpected " + describe_byte(s_[pos_]) + "; expected ':' after a key");
      }
      ++pos_;
      skip_ws();
      TICTAC_RETURN_IF_ERROR(parse_value(members.back().value, depth));
      skip_ws();
      if (pos_ >= s_.size())
        return error("unexpected end of input; expected ',' or '}' in an object");
      if (s_[pos_] == '}') {
        ++pos_;
        v.members_.assign(std::make_move_iterator(members.begin()),
                          std::make_move_iterator(members.end()));
        members.clear();
        return Status::Ok();
      }
      if (s_[pos_] != ',') {
        return error("unexpected " + describe_byte(s_[pos_]) +
                     "; expected ',' or '}' in an object");
      }
      ++pos_;
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == '}') return error("trailing comma before '}'");
    }
  }

  std::string_view s_;
  ParseOptions opt_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::size_t line_start_ = 0;
  // Per nesting depth, reused: a deque so that growing it never moves the vectors in use.
  std::deque<std::vector<Value>> item_scratch_;
  std::deque<std::vector<Member>> member_scratch_;
};

std::string_view to_string(Type type) {
  switch (type) {
    case Type::null:
      return "null";
    case Type::boolean:
      return "boolean";
    case Type::number:
      return "number";
    case Type::string:
      return "string";
    case Type::array:
      return "array";
    case Type::object:
      return "object";
  }
  return "unknown";
}

const std::string& Value::empty_string() {
  static const std::string kEmpty;
  return kEmpty;
}

std::string Value::where() const {
  return "line " + std::to_string(line_) + ", column " + std::to_string(column_);
}

std::optional<std::uint64_t> Value::as_uint64() const {
  if (type_ != Type::number) return std::nullopt;
  const Decimal d = decompose(text_);
  if (d.digits.empty()) return 0;  // zero, including -0 and 0e5
  if (d.negative || d.point <= 0 || d.point > 20) return std::nullopt;
  const auto point = static_cast<std::size_t>(d.point);
  if (d.digits.size() > point) return std::nullopt;  // a fractional part remains
  const std::string whole = d.digits + std::string(point - d.digits.size(), '0');
  std::uint64_t out = 0;
  const auto r = std::from_chars(whole.data(), whole.data() + whole.size(), out);
  if (r.ec != std::errc() || r.ptr != whole.data() + whole.size()) return std::nullopt;
  return out;
}

const Value* Value::find(std::string_view key) const {
  for (const Member& m : members_) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

Result<Value> parse(std::string_view text, const ParseOptions& options) {
  return Parser(text, options).run();
}

void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

std::string quoted(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

std::string format_double(double v) {
  TICTAC_CHECK(std::isfinite(v), "format_double needs a finite value, got " << v);
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  TICTAC_CHECK(r.ec == std::errc(), "to_chars failed for " << v);
  return std::string(buf, r.ptr);
}

}  // namespace tictac::json
