// Placeholder while the command is being written; replaced by its owner.
#include "cli/commands.h"
namespace tictac::cli {
int run_order(Args& args) {
  (void)args;
  return report("order", Status(StatusCode::unavailable, "'order' is not available in this build yet"));
}
}  // namespace tictac::cli
