// Placeholder while the command is being written; replaced by its owner.
#include "cli/commands.h"
namespace tictac::cli {
int run_info(Args& args) {
  (void)args;
  return report("info", Status(StatusCode::unavailable, "'info' is not available in this build yet"));
}
}  // namespace tictac::cli
