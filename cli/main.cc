// tictac: command-line front end. `tictac help` lists the commands.
#include <cstdio>
#include <cstring>

#include "cli/commands.h"

namespace tictac::cli {
namespace {

const Command kCommands[] = {
    {"order", run_order,
     "--graph G.json --policy random|fifo|layer|tic|tac|optimal [--bandwidth BPS] [--seed N] [--out FILE]",
     "compute a transfer order (priorities per recv) for a graph"},
    {"simulate", run_simulate, "--graph G.json --policy P [simulation flags, see docs/simulator.md]",
     "simulate iterations with a policy and report the paper's metrics"},
    {"compare", run_compare, "--graph G.json [simulation flags] [--format table|json]",
     "simulate every policy on one graph and setting, side by side"},
    {"generate", run_generate,
     "--kind chain|seq-32|par-32|inception|random|layered [--size N] [--recvs N] [--seed N] [--out FILE]",
     "write a generated tictac-graph/1 file"},
    {"info", run_info, "[--tunables]", "show the build, which backends are viable here, and tunables"},
    {"perftest", run_perftest,
     "--backend tcp|ucx|verbs|loopback --test lat|bw|priority --server [--listen A] | --client --connect A | --local"
     " [--size B] [--iters N] [--warmup N] [--bulk B] [--hi-after B] [--chunk B] [--window N] [--outstanding N] [--timeout D]"
     " [--format table|json]",
     "transport microbenchmark: latency, bandwidth, high-priority latency behind bulk (docs/benchmarks.md)"},
};

void print_help(FILE* out) {
  std::fprintf(out,
               "tictac: communication scheduling for distributed deep learning\n\n"
               "usage: tictac <command> [flags]\n\ncommands:\n");
  for (const Command& c : kCommands) {
    std::fprintf(out, "  %-9s %s\n            %s\n", c.name, c.help, c.usage);
  }
  std::fprintf(out, "\nExit codes: 0 ok, 1 run failed, 2 bad input. Docs: docs/ in the source tree.\n");
}

}  // namespace
}  // namespace tictac::cli

int main(int argc, char** argv) {
  using namespace tictac::cli;
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    print_help(argc < 2 ? stderr : stdout);
    return argc < 2 ? kExitBadInput : kExitOk;
  }
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    tictac::Result<Args> args = Args::parse(argc, argv, 2);
    if (!args.ok()) return report(c.name, args.status());
    return c.run(*args);
  }
  std::fprintf(stderr, "tictac: unknown command '%s'\n\n", argv[1]);
  print_help(stderr);
  return kExitBadInput;
}
