// Placeholder while the command is being written; replaced by its owner.
#include "cli/commands.h"
namespace tictac::cli {
int run_generate(Args& args) {
  (void)args;
  return report("generate", Status(StatusCode::unavailable, "'generate' is not available in this build yet"));
}
}  // namespace tictac::cli
