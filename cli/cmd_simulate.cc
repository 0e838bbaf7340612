// Placeholder while the command is being written; replaced by its owner.
#include "cli/commands.h"
namespace tictac::cli {
int run_simulate(Args& args) {
  (void)args;
  return report("simulate", Status(StatusCode::unavailable, "'simulate' is not available in this build yet"));
}
}  // namespace tictac::cli
