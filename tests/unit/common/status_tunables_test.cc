#include <gtest/gtest.h>

#include <cstdlib>

#include "common/status.h"
#include "common/tunables.h"

namespace tictac {
namespace {

TEST(Status, OkByDefaultAndToString) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.to_string(), "ok");
  Status e(StatusCode::protocol_error, "bad magic", "peer 127.0.0.1:9");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.to_string(), "protocol_error: bad magic (peer 127.0.0.1:9)");
  EXPECT_EQ(e.with_context("recv").message(), "recv: bad magic");
}

TEST(Result, HoldsValueOrError) {
  Result<int> v = 3;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 3);
  Result<int> e = invalid_argument("nope");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::invalid_argument);
  Result<int> bogus = Status::Ok();  // an ok status without a value is a bug, reported as such
  EXPECT_EQ(bogus.status().code(), StatusCode::internal);
}

Status propagate(bool fail) {
  TICTAC_RETURN_IF_ERROR(fail ? Status(StatusCode::timeout, "slow") : Status::Ok());
  return Status(StatusCode::cancelled, "reached end");
}

TEST(Status, ReturnIfErrorPropagates) {
  EXPECT_EQ(propagate(true).code(), StatusCode::timeout);
  EXPECT_EQ(propagate(false).code(), StatusCode::cancelled);
}

TEST(Parse, Sizes) {
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("64K"), 65536u);
  EXPECT_EQ(*parse_size("1MiB"), 1u << 20);
  EXPECT_EQ(*parse_size("2G"), 2ull << 30);
  EXPECT_FALSE(parse_size("abc").ok());
  EXPECT_FALSE(parse_size("1.5M").ok());
  EXPECT_FALSE(parse_size("12X").ok());
  EXPECT_FALSE(parse_size("").ok());
  EXPECT_FALSE(parse_size("99999999999999999999G").ok());
}

TEST(Parse, DurationsBoolsNumbers) {
  EXPECT_EQ(parse_duration("30")->count(), 30'000'000'000);
  EXPECT_EQ(parse_duration("500ms")->count(), 500'000'000);
  EXPECT_EQ(parse_duration("2m")->count(), 120'000'000'000);
  EXPECT_FALSE(parse_duration("5 parsecs").ok());
  EXPECT_TRUE(*parse_bool("yes"));
  EXPECT_FALSE(*parse_bool("off"));
  EXPECT_FALSE(parse_bool("maybe").ok());
  EXPECT_DOUBLE_EQ(*parse_double("10e9"), 10e9);
  EXPECT_FALSE(parse_double("1e999").ok());
  EXPECT_FALSE(parse_int("12a").ok());
}

const SizeTunable kTestSize{"TICTAC_TEST_SIZE_TUNABLE", 1024, "a tunable for this test"};

TEST(Tunable, DefaultEnvAndBadValue) {
  ::unsetenv("TICTAC_TEST_SIZE_TUNABLE");
  EXPECT_EQ(*kTestSize.get(), 1024u);
  ::setenv("TICTAC_TEST_SIZE_TUNABLE", "8K", 1);
  EXPECT_EQ(*kTestSize.get(), 8192u);
  ::setenv("TICTAC_TEST_SIZE_TUNABLE", "lots", 1);
  Result<std::uint64_t> bad = kTestSize.get();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("TICTAC_TEST_SIZE_TUNABLE='lots'"), std::string::npos);
  ::unsetenv("TICTAC_TEST_SIZE_TUNABLE");
  bool listed = false;
  for (const TunableInfo& t : registered_tunables()) listed |= t.name == "TICTAC_TEST_SIZE_TUNABLE";
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace tictac
