#include "common/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

namespace tictac::json {
namespace {

// Parses text that must fail; returns the error message.
std::string parse_error(std::string_view text, const ParseOptions& opt = {}) {
  Result<Value> r = parse(text, opt);
  EXPECT_FALSE(r.ok()) << "parsed unexpectedly: " << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  return r.status().message();
}

TEST(Json, ParsesEveryTypeWithPositions) {
  Result<Value> r = parse("{\n  \"a\": [1, -2.5e3, true, false, null],\n  \"s\": \"x\"\n}");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Value& top = *r;
  ASSERT_TRUE(top.is_object());
  EXPECT_EQ(top.line(), 1);
  EXPECT_EQ(top.column(), 1);
  ASSERT_EQ(top.members().size(), 2u);
  EXPECT_EQ(top.members()[0].key, "a");
  EXPECT_EQ(top.members()[0].line, 2);
  EXPECT_EQ(top.members()[0].column, 3);
  const Value* a = top.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->is_array());
  ASSERT_EQ(a->items().size(), 5u);
  EXPECT_EQ(a->line(), 2);
  EXPECT_EQ(a->column(), 8);
  EXPECT_EQ(a->items()[0].as_number(), 1);
  EXPECT_EQ(a->items()[1].as_number(), -2500);
  EXPECT_EQ(a->items()[1].number_text(), "-2.5e3");
  EXPECT_EQ(a->items()[1].column(), 12);
  EXPECT_TRUE(a->items()[2].is_bool() && a->items()[2].as_bool());
  EXPECT_TRUE(a->items()[3].is_bool() && !a->items()[3].as_bool());
  EXPECT_TRUE(a->items()[4].is_null());
  const Value* s = top.find("s");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->as_string(), "x");
  EXPECT_EQ(s->where(), "line 3, column 8");
  EXPECT_EQ(top.find("missing"), nullptr);
  // Accessors of the wrong type give neutral values.
  EXPECT_EQ(s->as_number(), 0);
  EXPECT_EQ(s->number_text(), "");
  EXPECT_FALSE(s->as_uint64().has_value());
}

TEST(Json, ScalarTopLevelAndWhitespace) {
  Result<Value> r = parse(" \t\r\n 42 \n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->as_number(), 42);
  EXPECT_EQ(r->line(), 2);
  EXPECT_EQ(r->column(), 2);
}

TEST(Json, StringEscapes) {
  Result<Value> r = parse(R"("q\"b\\s\/n\nt\tr\rb\bf\f")");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->as_string(), "q\"b\\s/n\nt\tr\rb\bf\f");
}

TEST(Json, UnicodeEscapes) {
  Result<Value> r = parse(R"("\u0041\u00e9\u20AC\ud83d\ude00\u0000z")");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string expected = std::string("A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80") + '\0' + "z";
  EXPECT_EQ(r->as_string(), expected);
  // Raw UTF-8 passes through.
  Result<Value> raw = parse("\"caf\xC3\xA9\"");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->as_string(), "caf\xC3\xA9");
}

TEST(Json, BadUnicodeEscapes) {
  EXPECT_EQ(parse_error(R"("\ud83d")"),
            "line 1, column 8: high surrogate \\u escape must be followed by a \\u low surrogate");
  EXPECT_EQ(parse_error(R"("\ud83d\u0041")"),
            "line 1, column 8: high surrogate \\u escape must be followed by a \\u low surrogate");
  EXPECT_EQ(parse_error(R"("ab\ude00")"),
            "line 1, column 4: \\u escape is a low surrogate without a preceding high surrogate");
  EXPECT_EQ(parse_error(R"("\u12g4")"),
            "line 1, column 6: \\u must be followed by 4 hex digits, got 'g'");
  EXPECT_EQ(parse_error(R"("\u12)"), "line 1, column 6: unexpected end of input in a \\u escape");
  EXPECT_EQ(parse_error(R"("\x")"), "line 1, column 3: invalid escape '\\x'");
}

TEST(Json, RejectsInvalidUtf8AndControlCharacters) {
  EXPECT_EQ(parse_error("\"a\xFF\""), "line 1, column 3: invalid UTF-8 byte 0xff in string");
  EXPECT_EQ(parse_error("\"a\xC3\x28\""), "line 1, column 3: invalid UTF-8 sequence in string");
  EXPECT_EQ(parse_error("\"\xED\xA0\x80\""), "line 1, column 2: invalid UTF-8 sequence in string");
  EXPECT_EQ(parse_error("\"\xE2\x82"), "line 1, column 2: truncated UTF-8 sequence in string");
  EXPECT_EQ(parse_error("\"a\nb\""),
            "line 1, column 3: control character byte 0x0a inside a string; escape it (e.g. \\n, "
            "\\t, \\u0001)");
}

TEST(Json, SyntaxErrorsCarryPositions) {
  EXPECT_EQ(parse_error(""), "line 1, column 1: unexpected end of input; expected a value");
  EXPECT_EQ(parse_error("[1,]"), "line 1, column 4: trailing comma before ']'");
  EXPECT_EQ(parse_error("{\"a\": 1,\n }"), "line 2, column 2: trailing comma before '}'");
  EXPECT_EQ(parse_error("{\"a\" 1}"), "line 1, column 6: unexpected '1'; expected ':' after a key");
  EXPECT_EQ(parse_error("{\n\n  a: 1}"),
            "line 3, column 3: unexpected 'a'; expected a string key in an object");
  EXPECT_EQ(parse_error("[1 2]"),
            "line 1, column 4: unexpected '2'; expected ',' or ']' in an array");
  EXPECT_EQ(parse_error("{\"a\": 1 \"b\": 2}"),
            "line 1, column 9: unexpected '\"'; expected ',' or '}' in an object");
  EXPECT_EQ(parse_error("[1, 2"),
            "line 1, column 6: unexpected end of input; expected ',' or ']' in an array");
  EXPECT_EQ(parse_error("\"abc"), "line 1, column 5: unexpected end of input inside a string");
  EXPECT_EQ(parse_error("tru"), "line 1, column 1: invalid literal; expected 'true'");
  EXPECT_EQ(parse_error("nul1"), "line 1, column 1: invalid literal; expected 'null'");
  EXPECT_EQ(parse_error("{} x"), "line 1, column 4: unexpected 'x' after the JSON value");
  EXPECT_EQ(parse_error("// c\n1"), "line 1, column 1: unexpected '/'; expected a value");
  EXPECT_EQ(parse_error("NaN"), "line 1, column 1: unexpected 'N'; expected a value");
}

TEST(Json, NumberGrammar) {
  EXPECT_EQ(parse_error("012"), "line 1, column 1: leading zeros are not allowed in numbers");
  EXPECT_EQ(parse_error("-"), "line 1, column 2: a '-' must be followed by digits");
  EXPECT_EQ(parse_error("+1"), "line 1, column 1: unexpected '+'; expected a value");
  EXPECT_EQ(parse_error("1."), "line 1, column 3: a '.' in a number must be followed by digits");
  EXPECT_EQ(parse_error(".5"), "line 1, column 1: unexpected '.'; expected a value");
  EXPECT_EQ(parse_error("1e"), "line 1, column 3: an exponent in a number must have digits");
  EXPECT_EQ(parse_error("[1e400]"), "line 1, column 2: number 1e400 is too large for a double");
  Result<Value> tiny = parse("1e-400");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->as_number(), 0.0);
  Result<Value> z = parse("-0.0E+2");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->as_number(), 0.0);
}

TEST(Json, ExactUnsignedIntegers) {
  auto u = [](const char* text) -> std::optional<std::uint64_t> {
    Result<Value> r = parse(text);
    EXPECT_TRUE(r.ok()) << text;
    return r.ok() ? r->as_uint64() : std::nullopt;
  };
  EXPECT_EQ(u("0"), 0u);
  EXPECT_EQ(u("-0"), 0u);
  EXPECT_EQ(u("3"), 3u);
  EXPECT_EQ(u("3.0"), 3u);
  EXPECT_EQ(u("1e6"), 1000000u);
  EXPECT_EQ(u("2.5E1"), 25u);
  EXPECT_EQ(u("0.0125e4"), 125u);
  EXPECT_EQ(u("18446744073709551615"), UINT64_MAX);  // beyond a double's 53 bits, still exact
  EXPECT_EQ(u("9007199254740993"), 9007199254740993u);
  EXPECT_EQ(u("18446744073709551616"), std::nullopt);
  EXPECT_EQ(u("1e20"), std::nullopt);
  EXPECT_EQ(u("-1"), std::nullopt);
  EXPECT_EQ(u("2.5"), std::nullopt);
  EXPECT_EQ(u("1e-3"), std::nullopt);
  EXPECT_EQ(u("1.00000000000000000001"), std::nullopt);
}

TEST(Json, DepthLimit) {
  ParseOptions opt;
  opt.max_depth = 8;
  EXPECT_TRUE(parse("[[[[[[[[1]]]]]]]]", opt).ok());
  EXPECT_EQ(parse_error("[[[[[[[[[1]]]]]]]]]", opt),
            "line 1, column 9: arrays and objects nested deeper than 8 levels");
  EXPECT_EQ(parse_error("{\"a\":{\"a\":{\"a\":1}}}", ParseOptions{2}),
            "line 1, column 11: arrays and objects nested deeper than 2 levels");
  // The default limit stops hostile nesting long before the stack would overflow.
  const std::string deep(1'000'000, '[');
  EXPECT_EQ(parse_error(deep),
            "line 1, column 257: arrays and objects nested deeper than 256 levels");
  const std::string ok = std::string(256, '[') + std::string(256, ']');
  EXPECT_TRUE(parse(ok).ok());
}

TEST(Json, DuplicateKeys) {
  EXPECT_EQ(parse_error("{\"a\": 1,\n \"b\": 2,\n \"a\": 3}"),
            "line 3, column 2: duplicate key \"a\" (first at line 1, column 2)");
  // Past the linear-scan size the indexed check reports the same way.
  std::string big = "{";
  for (int i = 0; i < 100; ++i)
    big += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ", ";
  big += "\"k42\": 0}";
  const std::string msg = parse_error(big);
  EXPECT_NE(msg.find("duplicate key \"k42\" (first at line 1, column "), std::string::npos) << msg;
  // Same keys in different objects are fine.
  EXPECT_TRUE(parse("[{\"a\": 1}, {\"a\": 2}]").ok());
}

TEST(Json, QuotedRoundTrips) {
  const std::string nasty = std::string("a\"b\\c\n\t\x01\x1f/") + '\0' + "\xC3\xA9";
  const std::string q = json::quoted(nasty);
  EXPECT_EQ(q, std::string("\"a\\\"b\\\\c\\n\\t\\u0001\\u001f/\\u0000\xC3\xA9\""));
  Result<Value> r = parse(q);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->as_string(), nasty);
}

TEST(Json, FormatDoubleRoundTripsExactly) {
  const double fixed[] = {0.0,
                          1.0,
                          0.1,
                          1e-3,
                          1.0 / 3,
                          2.5e-7,
                          1e300,
                          5e-324,
                          123456789.125,
                          0.30000000000000004,
                          1.7976931348623157e308};
  for (double v : fixed) {
    const std::string s = format_double(v);
    Result<Value> r = parse(s);
    ASSERT_TRUE(r.ok()) << s;
    EXPECT_EQ(r->as_number(), v) << s;
  }
  EXPECT_EQ(format_double(0.001), "0.001");
  EXPECT_EQ(format_double(2.0), "2");
  std::mt19937_64 gen(7);
  for (int i = 0; i < 2000; ++i) {
    std::uint64_t bits = gen();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    if (!std::isfinite(v)) continue;
    const std::string s = format_double(v);
    Result<Value> r = parse(s);
    ASSERT_TRUE(r.ok()) << s;
    const double back = r->as_number();
    EXPECT_EQ(std::memcmp(&v, &back, sizeof v), 0) << s;
  }
}

TEST(JsonDeathTest, FormatDoubleRejectsNonFinite) {
  EXPECT_DEATH(format_double(std::nan("")), "finite");
}

}  // namespace
}  // namespace tictac::json
