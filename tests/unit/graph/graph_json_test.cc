#include "priority/graph_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "priority/generators.h"

namespace tictac::priority {
namespace {

// A document whose ops array holds `ops_lines`, one op per line starting at line 3.
std::string doc(const std::string& ops_lines) {
  return "{\"format\": \"tictac-graph/1\",\n\"ops\": [\n" + ops_lines + "\n]}\n";
}

std::string load_error(const std::string& text) {
  Result<Graph> g = parse_graph_json(text, "g.json");
  EXPECT_FALSE(g.ok()) << "loaded unexpectedly:\n" << text;
  if (g.ok()) return "";
  EXPECT_EQ(g.status().code(), StatusCode::invalid_argument);
  return g.status().message();
}

// Ops always follow `w` (a recv at line 3) so the op under test sits at line 4, column 1.
std::string op_error(const std::string& op) {
  return load_error(doc("{\"name\": \"w\", \"kind\": \"recv\", \"bytes\": 4},\n" + op));
}

TEST(GraphJson, LoadsAValidGraph) {
  Result<Graph> g = parse_graph_json(doc(
      "{\"name\": \"w1\", \"kind\": \"recv\", \"bytes\": 1048576},\n"
      "{\"name\": \"w2\", \"kind\": \"recv\", \"bytes\": 1e3, \"time\": 0.25, \"inputs\": []},\n"
      "  {\"name\": \"c1\", \"kind\": \"compute\", \"inputs\": [\"w1\", \"w2\"], \"time\": "
      "0.001}"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(g->size(), 3u);
  EXPECT_EQ(g->op(0).bytes, 1048576u);
  EXPECT_FALSE(g->op(0).time.has_value());
  EXPECT_EQ(g->op(1).bytes, 1000u);
  EXPECT_EQ(g->op(1).time, 0.25);
  EXPECT_EQ(g->op(2).kind, OpKind::compute);
  EXPECT_EQ(g->op(2).inputs, (std::vector<OpId>{0, 1}));
  EXPECT_EQ(g->op(2).pos.line, 5);
  EXPECT_EQ(g->op(2).pos.column, 3);
  EXPECT_EQ(g->recvs().size(), 2u);
}

TEST(GraphJson, NameAndMetaAreAccepted) {
  Result<Graph> g = parse_graph_json(
      "{\"name\": \"tiny\", \"meta\": {\"anything\": [1, {\"x\": null}]}, \"format\": "
      "\"tictac-graph/1\","
      " \"ops\": [{\"name\": \"w\", \"kind\": \"recv\", \"time\": 0}]}");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->size(), 1u);
}

TEST(GraphJson, EmptyOpsIsAnEmptyGraph) {
  Result<Graph> g = parse_graph_json("{\"format\": \"tictac-graph/1\", \"ops\": []}");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->size(), 0u);
}

TEST(GraphJson, UnknownKindNamesTheOp) {
  EXPECT_EQ(
      op_error("{\"name\": \"conv1\", \"kind\": \"matmul\", \"time\": 1}"),
      "g.json: op 'conv1' (line 4, column 1): field 'kind' (line 4, column 27) must be \"recv\" "
      "or \"compute\", got the string \"matmul\"");
  EXPECT_EQ(
      op_error("{\"name\": \"conv1\", \"kind\": 3, \"time\": 1}"),
      "g.json: op 'conv1' (line 4, column 1): field 'kind' (line 4, column 27) must be \"recv\" "
      "or \"compute\", got 3");
}

TEST(GraphJson, MissingKind) {
  EXPECT_EQ(
      op_error("{\"name\": \"conv1\", \"time\": 1}"),
      "g.json: op 'conv1' (line 4, column 1): missing field 'kind' (\"recv\" or \"compute\")");
}

TEST(GraphJson, UnknownFieldCatchesTypos) {
  EXPECT_EQ(op_error("{\"name\": \"w2\", \"kind\": \"recv\", \"byte\": 4}"),
            "g.json: op 'w2' (line 4, column 1): unknown field \"byte\" (line 4, column 32); an op "
            "has only \"name\", \"kind\", \"inputs\", \"time\", \"bytes\"");
}

TEST(GraphJson, BytesMustBeANonNegativeInteger) {
  EXPECT_EQ(op_error("{\"name\": \"w2\", \"kind\": \"recv\", \"bytes\": \"4096\"}"),
            "g.json: op 'w2' (line 4, column 1): field 'bytes' (line 4, column 41) must be a "
            "non-negative integer below 2^64, got the string \"4096\"");
  EXPECT_EQ(op_error("{\"name\": \"w2\", \"kind\": \"recv\", \"bytes\": -5}"),
            "g.json: op 'w2' (line 4, column 1): field 'bytes' (line 4, column 41) must be a "
            "non-negative integer below 2^64, got -5");
  EXPECT_EQ(op_error("{\"name\": \"w2\", \"kind\": \"recv\", \"bytes\": 2.5}"),
            "g.json: op 'w2' (line 4, column 1): field 'bytes' (line 4, column 41) must be a "
            "non-negative integer below 2^64, got 2.5");
  EXPECT_EQ(op_error("{\"name\": \"w2\", \"kind\": \"recv\", \"bytes\": 18446744073709551616}"),
            "g.json: op 'w2' (line 4, column 1): field 'bytes' (line 4, column 41) must be a "
            "non-negative integer below 2^64, got 18446744073709551616");
  EXPECT_EQ(op_error("{\"name\": \"w2\", \"kind\": \"recv\", \"bytes\": null}"),
            "g.json: op 'w2' (line 4, column 1): field 'bytes' (line 4, column 41) must be a "
            "non-negative integer below 2^64, got null");
}

TEST(GraphJson, TimeMustBeANonNegativeNumber) {
  EXPECT_EQ(
      op_error("{\"name\": \"c\", \"kind\": \"compute\", \"inputs\": [\"w\"], \"time\": -0.5}"),
      "g.json: op 'c' (line 4, column 1): field 'time' (line 4, column 59) must be a number "
      "of seconds >= 0, got -0.5");
  EXPECT_EQ(
      op_error("{\"name\": \"c\", \"kind\": \"compute\", \"inputs\": [\"w\"], \"time\": \"1ms\"}"),
      "g.json: op 'c' (line 4, column 1): field 'time' (line 4, column 59) must be a number "
      "of seconds >= 0, got the string \"1ms\"");
}

TEST(GraphJson, InputsMustBeAnArrayOfNames) {
  EXPECT_EQ(
      op_error("{\"name\": \"c\", \"kind\": \"compute\", \"inputs\": \"w\", \"time\": 1}"),
      "g.json: op 'c' (line 4, column 1): field 'inputs' (line 4, column 44) must be an array "
      "of op names, got the string \"w\"");
  EXPECT_EQ(
      op_error("{\"name\": \"c\", \"kind\": \"compute\", \"inputs\": [\"w\", 7], \"time\": 1}"),
      "g.json: op 'c' (line 4, column 1): field 'inputs' (line 4, column 50) must list op names "
      "(non-empty strings), got 7");
  EXPECT_EQ(
      op_error("{\"name\": \"c\", \"kind\": \"compute\", \"inputs\": [\"\"], \"time\": 1}"),
      "g.json: op 'c' (line 4, column 1): field 'inputs' (line 4, column 45) must list op names "
      "(non-empty strings), got the string \"\"");
}

TEST(GraphJson, OpWithoutUsableNameIsNamedByIndex) {
  EXPECT_EQ(op_error("{\"kind\": \"recv\", \"bytes\": 1}"),
            "g.json: op #1 (line 4, column 1): missing field 'name' (a non-empty, unique string)");
  EXPECT_EQ(
      op_error("{\"name\": 12, \"kind\": \"recv\", \"bytes\": 1}"),
      "g.json: op #1 (line 4, column 1): field 'name' (line 4, column 10) must be a non-empty "
      "string, got 12");
  EXPECT_EQ(
      op_error("{\"name\": \"\", \"kind\": \"recv\", \"bytes\": 1}"),
      "g.json: op #1 (line 4, column 1): field 'name' (line 4, column 10) must be a non-empty "
      "string, got the string \"\"");
  EXPECT_EQ(op_error("[\"w\"]"),
            "g.json: op #1 (line 4, column 1): each op must be an object like {\"name\": ..., "
            "\"kind\": ...}, got array");
}

TEST(GraphJson, FormatTag) {
  EXPECT_EQ(
      load_error("{\"ops\": []}"),
      "g.json: missing the format tag; the top-level object needs \"format\": \"tictac-graph/1\"");
  EXPECT_EQ(
      load_error("{\"format\": \"tictac-graph/2\", \"ops\": []}"),
      "g.json: line 1, column 12: unsupported format \"tictac-graph/2\"; expected \"format\": "
      "\"tictac-graph/1\"");
  EXPECT_EQ(load_error("{\"format\": 1, \"ops\": []}"),
            "g.json: line 1, column 12: unsupported format got 1; expected \"format\": "
            "\"tictac-graph/1\"");
}

TEST(GraphJson, TopLevelShape) {
  EXPECT_EQ(
      load_error("[1]"),
      "g.json: line 1, column 1: the top level must be an object {\"format\": \"tictac-graph/1\", "
      "\"ops\": [...]}, got array");
  EXPECT_EQ(
      load_error("{\"format\": \"tictac-graph/1\"}"),
      "g.json: line 1, column 1: the top-level object needs \"ops\": [ ... ] (an array of ops)");
  EXPECT_EQ(
      load_error("{\"format\": \"tictac-graph/1\", \"ops\": {}}"),
      "g.json: line 1, column 37: the top-level object needs \"ops\": [ ... ] (an array of ops), "
      "got object");
  EXPECT_EQ(
      load_error("{\"format\": \"tictac-graph/1\", \"op\": []}"),
      "g.json: line 1, column 30: unknown top-level field \"op\"; expected \"format\", \"ops\" and "
      "optionally \"name\", \"meta\"");
  EXPECT_EQ(load_error("{\"format\": \"tictac-graph/1\", \"meta\": 1, \"ops\": []}"),
            "g.json: line 1, column 38: top-level 'meta' must be an object, got 1");
  EXPECT_EQ(load_error("{\"format\": \"tictac-graph/1\", \"name\": [], \"ops\": []}"),
            "g.json: line 1, column 38: top-level 'name' must be a string, got array");
}

TEST(GraphJson, SyntaxErrorsNameTheSourceAndPosition) {
  EXPECT_EQ(load_error(doc("{\"name\": \"w\", \"kind\": \"recv\", \"bytes\": 4,}")),
            "g.json: line 3, column 42: trailing comma before '}'");
  EXPECT_EQ(load_error("{\"format\": \"tictac-graph/1\", \"format\": \"x\", \"ops\": []}"),
            "g.json: line 1, column 30: duplicate key \"format\" (first at line 1, column 2)");
}

TEST(GraphJson, StructuralErrorsCarryPositions) {
  EXPECT_EQ(
      op_error(
          "{\"name\": \"c\", \"kind\": \"compute\", \"inputs\": [\"w\", \"nope\"], \"time\": 1}"),
      "g.json: op 'c' (line 4, column 1): unknown input 'nope'");
  EXPECT_EQ(op_error("{\"name\": \"w\", \"kind\": \"recv\", \"bytes\": 1}"),
            "g.json: op 'w' (line 4, column 1): duplicate name; first defined as op 'w' (line 3, "
            "column 1)");
  EXPECT_EQ(op_error("{\"name\": \"c\", \"kind\": \"compute\", \"inputs\": [\"w\"]}"),
            "g.json: op 'c' (line 4, column 1): a compute op needs 'time' (seconds)");
  EXPECT_EQ(op_error("{\"name\": \"r\", \"kind\": \"recv\"}"),
            "g.json: op 'r' (line 4, column 1): a recv needs 'bytes' or 'time' (or both)");
  EXPECT_EQ(op_error("{\"name\": \"c\", \"kind\": \"compute\", \"inputs\": [\"c\"], \"time\": 1}"),
            "g.json: op 'c' (line 4, column 1): lists itself as an input");
  EXPECT_EQ(
      op_error("{\"name\": \"c\", \"kind\": \"compute\", \"time\": 1, \"bytes\": 3}"),
      "g.json: op 'c' (line 4, column 1): 'bytes' is only meaningful on a recv; use kind \"recv\"");
  const std::string cycle =
      load_error(doc("{\"name\": \"a\", \"kind\": \"compute\", \"inputs\": [\"b\"], \"time\": 1},\n"
                     "{\"name\": \"b\", \"kind\": \"compute\", \"inputs\": [\"a\"], \"time\": 1}"));
  EXPECT_EQ(cycle, "g.json: op 'a' (line 3, column 1): is on a cycle: 'b' -> 'a' -> 'b'");
}

void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.size(), b.size());
  for (OpId i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.op(i).name, b.op(i).name);
    EXPECT_EQ(a.op(i).kind, b.op(i).kind);
    EXPECT_EQ(a.op(i).inputs, b.op(i).inputs);
    EXPECT_EQ(a.op(i).time, b.op(i).time) << a.op(i).name;  // bit-exact doubles
    EXPECT_EQ(a.op(i).bytes, b.op(i).bytes);
  }
}

TEST(GraphJson, RoundTripsExactly) {
  std::vector<OpSpec> specs(4);
  specs[0].name = "w \"quoted\" \\ \xC3\xA9\t";
  specs[0].kind = OpKind::recv;
  specs[0].bytes = UINT64_MAX;
  specs[1].name = "w2";
  specs[1].kind = OpKind::recv;
  specs[1].time = 1.0 / 3;
  specs[2].name = "c/1";
  specs[2].inputs = {specs[0].name, "w2"};
  specs[2].time = 0.1 + 0.2;
  specs[3].name = "c/2";
  specs[3].inputs = {"c/1"};
  specs[3].time = 5e-324;
  Result<Graph> g = Graph::build(specs);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const std::string text = graph_to_json(*g);
  Result<Graph> back = parse_graph_json(text);
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << text;
  expect_same_graph(*g, *back);
  EXPECT_EQ(graph_to_json(*back), text);
  // One op per line, so loader positions point at the op.
  EXPECT_EQ(back->op(2).pos.line, 6);
}

TEST(GraphJson, GeneratedGraphsRoundTrip) {
  for (Result<Graph> g : {make_seq32(), make_par32(), make_inception_like(3, 4, 9),
                          make_random_dag(300, 60, 5), make_layered(2000, 200, 3)}) {
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    Result<Graph> back = parse_graph_json(graph_to_json(*g));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    expect_same_graph(*g, *back);
  }
}

class GraphFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tictac_graph_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(GraphFileTest, SaveThenLoad) {
  Result<Graph> g = make_inception_like(2, 3, 1);
  ASSERT_TRUE(g.ok());
  const std::string path = (dir_ / "g.json").string();
  ASSERT_TRUE(save_graph_file(*g, path).ok());
  Result<Graph> back = load_graph_file(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  expect_same_graph(*g, *back);
  // Nothing but the file itself is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
}

TEST_F(GraphFileTest, LoadErrorsNameThePath) {
  const std::string missing = (dir_ / "missing.json").string();
  Result<Graph> r = load_graph_file(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::invalid_argument);
  EXPECT_EQ(r.status().message(),
            "cannot read graph file '" + missing + "': No such file or directory");
  Result<Graph> d = load_graph_file(dir_.string());
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "cannot read graph file '" + dir_.string() + "': Is a directory");
  // Content errors are prefixed with the path.
  const std::string bad = (dir_ / "bad.json").string();
  std::ofstream(bad) << "{\"format\": \"tictac-graph/1\",\n \"ops\": [1,]}";
  Result<Graph> b = load_graph_file(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), bad + ": line 2, column 12: trailing comma before ']'");
}

TEST_F(GraphFileTest, SaveFailureIsReported) {
  Result<Graph> g = make_seq32();
  ASSERT_TRUE(g.ok());
  const std::string path = (dir_ / "no_such_dir" / "g.json").string();
  const Status s = save_graph_file(*g, path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write graph file '" + path + "'"), std::string::npos)
      << s.message();
}

std::string bundled(const std::string& name) {
  return std::string(TICTAC_SOURCE_ROOT) + "/bench/graphs/" + name;
}

TEST(BundledGraphs, AllLoad) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(bundled(""))) {
    if (entry.path().extension() != ".json") continue;
    Result<Graph> g = load_graph_file(entry.path().string());
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_GT(g->recvs().size(), 0u) << entry.path();
    EXPECT_LT(std::filesystem::file_size(entry.path()), 1u << 20) << entry.path();
    ++count;
  }
  EXPECT_GE(count, 6);
}

std::uint64_t total_bytes(const Graph& g) {
  std::uint64_t sum = 0;
  for (OpId r : g.recvs()) sum += g.op(r).bytes.value_or(0);
  return sum;
}

TEST(BundledGraphs, ModelsHaveTheirRealParameterCounts) {
  struct Expect {
    const char* file;
    std::uint64_t params;  // float32 parameters transferred
  };
  for (const Expect& e :
       {Expect{"vgg16_like.json", 138'357'544}, Expect{"resnet50_like.json", 25'610'152},
        Expect{"inception_v3_like.json", 23'851'784}, Expect{"alexnet_like.json", 61'100'840}}) {
    Result<Graph> g = load_graph_file(bundled(e.file));
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(total_bytes(*g), e.params * 4) << e.file;
  }
}

TEST(BundledGraphs, SyntheticOnesMatchTheGenerators) {
  Result<Graph> seq = load_graph_file(bundled("seq32.json"));
  Result<Graph> par = load_graph_file(bundled("par32.json"));
  ASSERT_TRUE(seq.ok()) << seq.status().to_string();
  ASSERT_TRUE(par.ok()) << par.status().to_string();
  Result<Graph> gen_seq = make_seq32();
  Result<Graph> gen_par = make_par32();
  ASSERT_TRUE(gen_seq.ok() && gen_par.ok());
  expect_same_graph(*seq, *gen_seq);
  expect_same_graph(*par, *gen_par);
}

}  // namespace
}  // namespace tictac::priority
