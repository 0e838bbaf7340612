// edge_priorities (TF-free): TAC uses the profiled op times and the recvs' sizes, TIC does not;
// TICTAC_TF_OP_TIMES parsing and its errors.
#include "integration/tf/rendezvous/graph_priorities.h"

#include <gtest/gtest.h>

namespace tictac::tfrdv {
namespace {

// Two parameters: the big one (1 MB: 1 s at 8 Mbit/s) feeds a 1 ms op, the small one (1 kB:
// 1 ms) a 50 ms op; both feed the loss. Sending the small one first overlaps its 50 ms with the
// big transfer (done at ~1.002 s); big first ends at ~1.05 s. TIC sees neither times nor sizes.
std::vector<NodeSpec> two_params() {
  std::vector<NodeSpec> g(5);
  g[0] = NodeSpec{"recv_a", {}, true, "edge_a_big", 1'000'000};
  g[1] = NodeSpec{"recv_b", {}, true, "edge_b_small", 1'000};
  g[2] = NodeSpec{"use_a", {"recv_a"}, false, "", 0};
  g[3] = NodeSpec{"use_b", {"recv_b"}, false, "", 0};
  g[4] = NodeSpec{"loss", {"use_a", "use_b"}, false, "", 0};
  return g;
}

std::unordered_map<std::string, std::int64_t> tac_of(const std::vector<NodeSpec>& g,
                                                     const std::string& json) {
  TacTimings t;
  std::string error;
  EXPECT_TRUE(parse_tac_timings(json, &t, &error)) << error;
  std::unordered_map<std::string, std::int64_t> out;
  EXPECT_TRUE(edge_priorities(g, "tac", &out, &error, &t)) << error;
  return out;
}

TEST(GraphPriorities, TacUsesOpTimesAndSizesTicDoesNot) {
  auto tac =
      tac_of(two_params(), R"({"ops": {"use_a": 0.001, "use_b": 0.05}, "bandwidth_bps": 8e6})");
  EXPECT_LT(tac.at("edge_b_small"), tac.at("edge_a_big"));
  // Counter-check: TIC sees neither times nor sizes; the two parameters tie.
  std::unordered_map<std::string, std::int64_t> tic;
  std::string error;
  ASSERT_TRUE(edge_priorities(two_params(), "tic", &tic, &error)) << error;
  EXPECT_EQ(tic.at("edge_a_big"), tic.at("edge_b_small"));
  // Equal sizes (1 s each): the parameter whose consumer runs longer goes first, both ways.
  std::vector<NodeSpec> equal = two_params();
  equal[1].bytes = 1'000'000;
  auto a_long = tac_of(equal, R"({"ops": {"use_a": 0.05, "use_b": 0.001}, "bandwidth_bps": 8e6})");
  EXPECT_LT(a_long.at("edge_a_big"), a_long.at("edge_b_small"));
  auto b_long = tac_of(equal, R"({"ops": {"use_a": 0.001, "use_b": 0.05}, "bandwidth_bps": 8e6})");
  EXPECT_LT(b_long.at("edge_b_small"), b_long.at("edge_a_big"));
}

TEST(GraphPriorities, TacWithoutTimingsAndBadFilesAreErrors) {
  std::unordered_map<std::string, std::int64_t> out;
  std::string error;
  EXPECT_FALSE(edge_priorities(two_params(), "tac", &out, &error));
  EXPECT_NE(error.find("TICTAC_TF_OP_TIMES"), std::string::npos) << error;
  TacTimings t;
  EXPECT_FALSE(parse_tac_timings("{}", &t, &error));
  EXPECT_NE(error.find("ops"), std::string::npos) << error;
  EXPECT_FALSE(parse_tac_timings(R"({"ops": {"x": -1}})", &t, &error));
  EXPECT_NE(error.find("ops[\"x\"]"), std::string::npos) << error;
  EXPECT_FALSE(parse_tac_timings(R"({"ops": {}, "bandwidth_bps": 0})", &t, &error));
  EXPECT_NE(error.find("bandwidth_bps"), std::string::npos) << error;
  EXPECT_FALSE(parse_tac_timings("not json", &t, &error));
  EXPECT_FALSE(edge_priorities(two_params(), "fastest", &out, &error));
  EXPECT_NE(error.find("expected tic, tac or none"), std::string::npos) << error;
}

}  // namespace
}  // namespace tictac::tfrdv
