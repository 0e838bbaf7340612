// Placeholder while the command is being written; replaced by its owner.
#include "cli/commands.h"
namespace tictac::cli {
int run_compare(Args& args) {
  (void)args;
  return report("compare", Status(StatusCode::unavailable, "'compare' is not available in this build yet"));
}
}  // namespace tictac::cli
