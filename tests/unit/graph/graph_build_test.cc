#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "priority/graph.h"

namespace tictac::priority {
namespace {

OpSpec recv(std::string name, std::uint64_t bytes, int line = 0) {
  OpSpec s;
  s.name = std::move(name);
  s.kind = OpKind::recv;
  s.bytes = bytes;
  s.pos = SourcePos{line, line > 0 ? 5 : 0};
  return s;
}

OpSpec compute(std::string name, std::vector<std::string> inputs, double time, int line = 0) {
  OpSpec s;
  s.name = std::move(name);
  s.inputs = std::move(inputs);
  s.time = time;
  s.pos = SourcePos{line, line > 0 ? 5 : 0};
  return s;
}

std::string build_error(std::vector<OpSpec> specs) {
  Result<Graph> g = Graph::build(std::move(specs));
  EXPECT_FALSE(g.ok());
  if (g.ok()) return "";
  EXPECT_EQ(g.status().code(), StatusCode::invalid_argument);
  return g.status().message();
}

TEST(GraphBuild, BuildsConsumersRecvsAndTopoOrder) {
  // Given out of order: c2 is listed before its input c1.
  Result<Graph> g = Graph::build({compute("c2", {"c1", "w2"}, 2e-3), recv("w1", 100),
                                  compute("c1", {"w1", "w1"}, 1e-3), recv("w2", 200)});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->size(), 4u);
  const OpId c2 = *g->find("c2"), w1 = *g->find("w1"), c1 = *g->find("c1"), w2 = *g->find("w2");
  EXPECT_EQ(g->op(c1).inputs, std::vector<OpId>{w1});  // duplicate input collapsed
  EXPECT_EQ(g->op(c2).inputs, (std::vector<OpId>{c1, w2}));
  ASSERT_EQ(g->consumers(w1).size(), 1u);
  EXPECT_EQ(g->consumers(w1)[0], c1);
  EXPECT_EQ(g->recvs(), (std::vector<OpId>{w1, w2}));
  EXPECT_EQ(g->recv_index(w2), 1);
  EXPECT_EQ(g->recv_index(c1), -1);
  EXPECT_EQ(g->topo_order(), (std::vector<OpId>{w1, c1, w2, c2}));
  EXPECT_FALSE(g->find("nope").has_value());
}

TEST(GraphBuild, DuplicateNameNamesBothPlaces) {
  EXPECT_EQ(
      build_error({recv("w", 1, 3), compute("c", {"w"}, 1, 4), recv("w", 2, 7)}),
      "op 'w' (line 7, column 5): duplicate name; first defined as op 'w' (line 3, column 5)");
}

TEST(GraphBuild, UnknownInput) {
  EXPECT_EQ(build_error({recv("w", 1, 2), compute("c", {"w", "wx"}, 1, 3)}),
            "op 'c' (line 3, column 5): unknown input 'wx'");
}

TEST(GraphBuild, SelfInput) {
  EXPECT_EQ(build_error({recv("w", 1), compute("c", {"w", "c"}, 1, 9)}),
            "op 'c' (line 9, column 5): lists itself as an input");
}

TEST(GraphBuild, CycleListsItsOps) {
  const std::string msg =
      build_error({recv("w", 1, 1), compute("a", {"w", "c"}, 1, 2), compute("b", {"a"}, 1, 3),
                   compute("c", {"b"}, 1, 4), compute("d", {"c"}, 1, 5)});
  // In data-flow direction; d only hangs off the cycle and is not listed.
  EXPECT_EQ(msg, "op 'a' (line 2, column 5): is on a cycle: 'b' -> 'c' -> 'a' -> 'b'");
}

TEST(GraphBuild, ComputeWithoutTime) {
  OpSpec c = compute("c", {"w"}, 0, 4);
  c.time.reset();
  EXPECT_EQ(build_error({recv("w", 1), c}),
            "op 'c' (line 4, column 5): a compute op needs 'time' (seconds)");
}

TEST(GraphBuild, RecvNeedsTimeOrBytes) {
  OpSpec w = recv("w", 1, 2);
  w.bytes.reset();
  EXPECT_EQ(build_error({w}),
            "op 'w' (line 2, column 5): a recv needs 'bytes' or 'time' (or both)");
  w.time = 0.5;  // time alone is enough
  EXPECT_TRUE(Graph::build({w}).ok());
}

TEST(GraphBuild, BadTimes) {
  for (double t : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(build_error({recv("w", 1), compute("c", {"w"}, t, 6)}),
              "op 'c' (line 6, column 5): time must be a finite number of seconds >= 0");
  }
}

TEST(GraphBuild, BytesOnComputeOp) {
  OpSpec c = compute("c", {"w"}, 1, 3);
  c.bytes = 10;
  const std::string msg = build_error({recv("w", 1), c});
  EXPECT_EQ(msg,
            "op 'c' (line 3, column 5): 'bytes' is only meaningful on a recv; use kind \"recv\"");
}

TEST(GraphBuild, EmptyName) {
  EXPECT_EQ(build_error({recv("w", 1), compute("", {"w"}, 1, 8)}),
            "op #1 (line 8, column 5): 'name' must be a non-empty string");
}

TEST(GraphBuild, DescribeWithoutPosition) {
  Result<Graph> g = Graph::build({recv("w", 1)});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->describe(0), "op 'w'");
}

}  // namespace
}  // namespace tictac::priority
