// describe_counters (transport/counters.h): every counter by name with its value, and the DATA
// frames by payload size over the non-empty classes only.
#include "transport/counters.h"

#include <gtest/gtest.h>

#include <string>

#include "common/log.h"
#include "transport/context.h"

namespace tictac::transport {
namespace {

TEST(TransportCounters, DescribeNamesEveryCounterAndTheNonEmptySizeClasses) {
  TransportCounters c;
  EXPECT_NE(describe_counters(c).find("data_frames=none"), std::string::npos)
      << describe_counters(c);
  c.readies_sent = 3;
  c.claimed_received = 4;
  c.tcp_lanes_up = 2;
  c.tcp_lane1_frames = 17;
  c.tcp_lane_switches = 5;
  c.tcp_lane_barrier_waits = 6;
  c.tcp_lane_barrier_wait_ns = 2'500'000;
  c.count_data_frame(70'000);  // [64K, 128K)
  c.count_data_frame(65'536);
  c.count_data_frame(0);  // [1, 2): an empty payload counts as one byte's class
  const std::string line = describe_counters(c);
  for (const char* want :
       {"readies_sent=3 ", "claimed_received=4 ", "tcp_lanes_up=2 ", "tcp_lane1_frames=17 ",
        "tcp_lane_switches=5 ", "tcp_lane_barrier_waits=6 ", "tcp_lane_barrier_wait_ms=2.5 ",
        "data_frames=[1-2)B:1,[64K-128K)B:2"}) {
    EXPECT_NE(line.find(want), std::string::npos) << "no '" << want << "' in: " << line;
  }
  EXPECT_EQ(line.find("none"), std::string::npos) << line;
}

// At info level a Context that is joined logs the line (TICTAC_LOG_LEVEL=info); at the default
// level (warn) it does not.
TEST(TransportCounters, AJoinedContextLogsThemAtInfoLevel) {
  const LogLevel before = log_level();
  for (const LogLevel level : {LogLevel::info, LogLevel::warn}) {
    set_log_level(level);
    auto ctx = Context::create({});
    ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
    ::testing::internal::CaptureStderr();
    (*ctx)->join();
    const std::string err = ::testing::internal::GetCapturedStderr();
    const bool logged =
        err.find("transport counters (this process so far): readies_sent=") != std::string::npos;
    EXPECT_EQ(logged, level == LogLevel::info)
        << "level " << static_cast<int>(level) << ": " << err;
  }
  set_log_level(before);
}

}  // namespace
}  // namespace tictac::transport
