// `tictac generate`: writes a generated graph in the tictac-graph/1 format (docs/graph-format.md).
#include <cerrno>
#include <climits>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "priority/generators.h"
#include "priority/graph_json.h"

namespace tictac::cli {
namespace {

using priority::Graph;

constexpr const char* kKinds = "chain, seq-32, par-32, inception, random, layered";

struct Flags {
  std::string kind;
  std::optional<std::int64_t> size;
  std::optional<std::int64_t> recvs;
  std::optional<std::int64_t> seed;
};

// Reads an optional integer flag, so that an absent flag can be told from a given one.
Status optional_int(Args& args, const std::string& name, std::optional<std::int64_t>& out) {
  if (!args.get(name).has_value()) return Status::Ok();
  Result<std::int64_t> v = args.get_int(name, 0);
  if (!v.ok()) return v.status();
  out = *v;
  return Status::Ok();
}

Result<int> as_int(const char* flag, std::int64_t v, std::int64_t lo) {
  if (v < lo || v > INT_MAX) {
    return invalid_argument(std::string("--") + flag + " must be in [" + std::to_string(lo) + ", " +
                            std::to_string(INT_MAX) + "], got " + std::to_string(v));
  }
  return static_cast<int>(v);
}

Status only_for(const Flags& f, const char* flag, bool given, const char* kinds) {
  if (!given) return Status::Ok();
  return invalid_argument(std::string("--") + flag + " does not apply to --kind " + f.kind +
                          " (it is used by --kind " + kinds + ")");
}

Result<Graph> generate(const Flags& f) {
  const std::uint64_t seed = static_cast<std::uint64_t>(f.seed.value_or(1));
  if (f.kind == "chain" || f.kind == "seq-32" || f.kind == "par-32") {
    TICTAC_RETURN_IF_ERROR(only_for(f, "seed", f.seed.has_value(), "inception, random, layered"));
    TICTAC_RETURN_IF_ERROR(only_for(f, "recvs", f.recvs.has_value(), "random, layered"));
    if (f.kind == "chain") {
      Result<int> layers = as_int("size", f.size.value_or(8), 1);
      if (!layers.ok()) return layers.status();
      return priority::make_chain(*layers, 1 << 20, 1e-3);
    }
    TICTAC_RETURN_IF_ERROR(
        only_for(f, "size", f.size.has_value(), "chain, inception, random, layered"));
    return f.kind == "seq-32" ? priority::make_seq32() : priority::make_par32();
  }
  if (f.kind == "inception") {
    TICTAC_RETURN_IF_ERROR(only_for(f, "recvs", f.recvs.has_value(), "random, layered"));
    Result<int> modules = as_int("size", f.size.value_or(10), 1);
    if (!modules.ok()) return modules.status();
    return priority::make_inception_like(*modules, 4, seed);
  }
  if (f.kind == "random" || f.kind == "layered") {
    const bool random = f.kind == "random";
    Result<int> ops = as_int("size", f.size.value_or(random ? 1000 : 100'000), 2);
    if (!ops.ok()) return ops.status();
    Result<int> recvs = as_int("recvs", f.recvs.value_or(random ? *ops / 5 : *ops / 100), 1);
    if (!recvs.ok()) return recvs.status();
    Result<Graph> g = random ? priority::make_random_dag(*ops, *recvs, seed)
                             : priority::make_layered(*ops, *recvs, seed);
    if (!g.ok())
      return g.status().with_context("--size " + std::to_string(*ops) + " --recvs " +
                                     std::to_string(*recvs));
    return g;
  }
  return invalid_argument(f.kind.empty() ? std::string("--kind is required; one of ") + kKinds
                                         : "unknown --kind '" + f.kind + "'; one of " + kKinds);
}

Status write_stdout(const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return errno_status(StatusCode::unavailable, "cannot write the graph to stdout", "fwrite",
                        errno);
  }
  return Status::Ok();
}

}  // namespace

int run_generate(Args& args) {
  Flags f;
  f.kind = args.get_or("kind", "");
  Status s = optional_int(args, "size", f.size);
  if (s.ok()) s = optional_int(args, "recvs", f.recvs);
  if (s.ok()) s = optional_int(args, "seed", f.seed);
  const std::optional<std::string> out = args.get("out");
  if (s.ok()) s = args.finish();
  if (s.ok() && out.has_value() && out->empty()) s = invalid_argument("--out needs a file name");
  if (!s.ok()) return report("generate", s);
  Result<Graph> g = generate(f);
  if (!g.ok()) return report("generate", g.status());
  if (!out.has_value()) return report("generate", write_stdout(priority::graph_to_json(*g)));
  s = priority::save_graph_file(*g, *out);
  if (!s.ok()) return report("generate", s);
  std::fprintf(stderr, "tictac generate: wrote %zu ops (%zu recvs) to %s\n", g->size(),
               g->recvs().size(), out->c_str());
  return kExitOk;
}

}  // namespace tictac::cli
