#include "priority/sim/trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/json.h"
#include "priority/sim/json_writer.h"
#include "sim_test_util.h"

namespace tictac::priority::sim {
namespace {

using testing::build;
using testing::compute;
using testing::fixed;
using testing::recv_bytes;

TEST(JsonWriter, WritesValidJsonWithEscapesAndNullForNaN) {
  JsonWriter j;
  j.begin_object()
      .key("s").value("a\"b\\c\n")
      .key("n").value(NAN)
      .key("i").value(-3)
      .key("u").value(std::uint64_t{7})
      .key("b").value(true)
      .key("d").value(0.25)
      .key("a").begin_array().value(1).null().begin_object().end_object().end_array()
      .end_object();
  Result<json::Value> v = json::parse(j.str());
  ASSERT_TRUE(v.ok()) << v.status().to_string() << "\n" << j.str();
  EXPECT_EQ(v->find("s")->as_string(), "a\"b\\c\n");
  EXPECT_TRUE(v->find("n")->is_null());
  EXPECT_EQ(v->find("i")->as_number(), -3);
  EXPECT_EQ(v->find("d")->as_number(), 0.25);
  EXPECT_EQ(v->find("a")->items().size(), 3u);
}

SimResult traced_run(int iterations) {
  const Graph g = build({recv_bytes("w\"1", 1), recv_bytes("w2", 1), compute("l1", 1, {"w\"1"}),
                         compute("l2", 1, {"l1", "w2"})});
  SimConfig c;
  c.bandwidth_bps = 8;
  c.mode = SimMode::training;
  c.iterations = iterations;
  c.record_timeline = true;
  Result<SimResult> r = simulate(g, fixed({0, 1}), c);
  EXPECT_TRUE(r.ok());
  return std::move(r).value();
}

TEST(ChromeTrace, OneCompleteEventPerIntervalLaidEndToEnd) {
  SimConfig c;
  c.mode = SimMode::training;
  const SimResult r = traced_run(2);
  Result<json::Value> v = json::parse(chrome_trace_json(r, c));
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  const json::Value* events = v->find("traceEvents");
  ASSERT_NE(events, nullptr);
  int complete = 0;
  double last_end_us = 0;
  bool saw_escaped_name = false;
  for (const json::Value& e : events->items()) {
    if (e.find("ph")->as_string() != "X") continue;
    ++complete;
    last_end_us = std::max(last_end_us, e.find("ts")->as_number() + e.find("dur")->as_number());
    saw_escaped_name |= e.find("name")->as_string() == "w\"1";
  }
  EXPECT_EQ(complete, static_cast<int>(r.timeline.size()));
  EXPECT_TRUE(saw_escaped_name);
  // Iteration 2 starts where iteration 1 ended: the trace spans both.
  EXPECT_NEAR(last_end_us, (r.iterations[0].time + r.iterations[1].time) * 1e6, 1e-3);
}

TEST(ChromeTrace, WritesAFileAndReportsAnUnwritablePath) {
  SimConfig c;
  const SimResult r = traced_run(1);
  const std::string path = ::testing::TempDir() + "/tictac_sim_trace_test.json";
  ASSERT_TRUE(write_chrome_trace(r, c, path).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(json::parse(text.str()).ok());
  std::remove(path.c_str());
  const Status bad = write_chrome_trace(r, c, "/nonexistent-dir/x/trace.json");
  EXPECT_EQ(bad.code(), StatusCode::invalid_argument);
  EXPECT_NE(bad.message().find("/nonexistent-dir/x/trace.json"), std::string::npos);
}

}  // namespace
}  // namespace tictac::priority::sim
