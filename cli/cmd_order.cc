// `tictac order`: computes a transfer order for a graph with one policy and prints it as
//   {"policy": "P", "priorities": {"<recv name>": <int>, ...}}
// with one entry per recv in file order (smaller = sent earlier; equal values are ties).
#include <cerrno>
#include <cstdio>
#include <limits>
#include <string>

#include "cli/commands.h"
#include "common/json.h"
#include "priority/graph_json.h"
#include "priority/schedule.h"

namespace tictac::cli {
namespace {

using priority::Graph;
using priority::Schedule;

std::string to_json(const Graph& graph, const Schedule& schedule) {
  std::string out = "{\n  \"policy\": ";
  json::append_quoted(out, schedule.policy);
  out += ",\n  \"priorities\": {";
  const std::vector<priority::OpId>& recvs = graph.recvs();
  for (std::size_t i = 0; i < recvs.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    json::append_quoted(out, graph.op(recvs[i]).name);
    out += ": ";
    out += std::to_string(schedule.priority[i]);
  }
  out += recvs.empty() ? "}\n}\n" : "\n  }\n}\n";
  return out;
}

Status write_all(FILE* f, const std::string& text, const std::string& what) {
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fflush(f) != 0) {
    return errno_status(StatusCode::unavailable, "cannot write " + what, "fwrite", errno);
  }
  return Status::Ok();
}

// Writes via a temporary file and rename, so a reader never sees half a file.
Status write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return errno_status(StatusCode::unavailable, "cannot create '" + tmp + "' for --out", "fopen", errno);
  }
  Status s = write_all(f, text, "'" + tmp + "'");
  if (std::fclose(f) != 0 && s.ok()) {
    s = errno_status(StatusCode::unavailable, "cannot close '" + tmp + "'", "fclose", errno);
  }
  if (s.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    s = errno_status(StatusCode::unavailable, "cannot rename '" + tmp + "' to '" + path + "'", "rename", errno);
  }
  if (!s.ok()) std::remove(tmp.c_str());
  return s;
}

Result<std::string> order(Args& args) {
  const std::optional<std::string> graph_path = args.get("graph");
  const std::string policy_name = args.get_or("policy", "");
  Result<double> bandwidth = args.get_double("bandwidth", 10e9);
  if (!bandwidth.ok()) return bandwidth.status();
  Result<std::int64_t> seed = args.get_int("seed", 0);
  if (!seed.ok()) return seed.status();
  const std::optional<std::string> out = args.get("out");
  TICTAC_RETURN_IF_ERROR(args.finish());
  if (!graph_path.has_value() || graph_path->empty()) {
    return invalid_argument("--graph G.json is required (a tictac-graph/1 file; see docs/graph-format.md)");
  }
  const priority::PolicyInfo* policy = priority::find_policy(policy_name);
  if (policy == nullptr) {
    return invalid_argument((policy_name.empty() ? std::string("--policy is required")
                                                 : "unknown --policy '" + policy_name + "'") +
                            "; one of " + priority::policy_names());
  }
  if (!(*bandwidth > 0) || *bandwidth == std::numeric_limits<double>::infinity()) {
    return invalid_argument("--bandwidth must be a positive number of bits per second, got " +
                            std::to_string(*bandwidth));
  }
  if (*seed < 0) return invalid_argument("--seed must be >= 0, got " + std::to_string(*seed));
  if (out.has_value() && out->empty()) return invalid_argument("--out needs a file name");
  Result<Graph> graph = priority::load_graph_file(*graph_path);
  if (!graph.ok()) return graph.status();
  priority::PolicyOptions options;
  options.bandwidth_bps = *bandwidth;
  options.seed = static_cast<std::uint64_t>(*seed);
  Result<Schedule> schedule = policy->fn(*graph, options);
  if (!schedule.ok()) return schedule.status().with_context("--policy " + policy_name);
  const std::string text = to_json(*graph, *schedule);
  if (out.has_value()) {
    TICTAC_RETURN_IF_ERROR(write_file(*out, text));
    std::fprintf(stderr, "tictac order: wrote %zu priorities (%s) to %s\n", schedule->priority.size(),
                 policy_name.c_str(), out->c_str());
    return std::string();
  }
  return text;
}

}  // namespace

int run_order(Args& args) {
  Result<std::string> text = order(args);
  if (!text.ok()) return report("order", text.status());
  if (text->empty()) return kExitOk;
  return report("order", write_all(stdout, *text, "the order to stdout"));
}

}  // namespace tictac::cli
