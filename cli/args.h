// Minimal command-line flag parsing for the tictac CLI: `--name value` or `--name=value`,
// boolean flags without a value, no positional arguments. Every lookup records the flag as
// known; finish() reports flags that no command asked for, so typos are errors, not ignored.
// Errors are invalid_argument Statuses that name the flag; the CLI maps them to exit code 2.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"

namespace tictac::cli {

class Args {
 public:
  // Parses argv[first..argc). Fails on a positional argument or an empty flag name.
  static Result<Args> parse(int argc, char** argv, int first);

  bool flag(const std::string& name);  // present (as --name or --name=true/1)
  std::optional<std::string> get(const std::string& name);
  std::string get_or(const std::string& name, const std::string& def);
  Result<double> get_double(const std::string& name, double def);
  Result<std::uint64_t> get_size(const std::string& name, std::uint64_t def);
  Result<std::int64_t> get_int(const std::string& name, std::int64_t def);
  // Fails naming the first flag that was given but never looked up.
  Status finish() const;

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> known_;
};

// Exit codes shared by all commands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the run itself failed (I/O, network, ...)
inline constexpr int kExitBadInput = 2;  // bad flags, bad graph file, bad config value

// Prints "tictac <command>: <status>" to stderr and returns the exit code for it.
int report(const char* command, const Status& status);

}  // namespace tictac::cli
