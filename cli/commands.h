// The tictac CLI's subcommands. Each returns a process exit code (see args.h) and writes its
// result to stdout, diagnostics to stderr. One file per command: cmd_<name>.cc.
#pragma once

#include "cli/args.h"

namespace tictac::cli {

struct Command {
  const char* name;
  int (*run)(Args& args);
  const char* usage;  // one line: flags
  const char* help;   // one line: what it does
};

int run_order(Args& args);
int run_simulate(Args& args);
int run_compare(Args& args);
int run_generate(Args& args);
int run_info(Args& args);
int run_perftest(Args& args);

}  // namespace tictac::cli
