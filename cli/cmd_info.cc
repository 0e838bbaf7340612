// `tictac info`: what this build contains and what is viable on this machine.
#include <cstdio>

#include "cli/commands.h"
#include "common/tunables.h"
#include "priority/schedule.h"

namespace tictac::cli {

int run_info(Args& args) {
  const bool tunables = args.flag("tunables");
  if (Status s = args.finish(); !s.ok()) return report("info", s);
  std::printf("tictac %s\n", TICTAC_VERSION);
  std::printf("policies: %s\n", priority::policy_names().c_str());
  if (tunables) {
    std::printf("\ntunables (environment variables):\n");
    for (const TunableInfo& t : registered_tunables()) {
      const std::string current = env_or_empty(t.name.c_str());
      std::printf("  %-24s default %-10s %s%s\n", t.name.c_str(), t.default_text.c_str(),
                  t.help.c_str(), current.empty() ? "" : (" [set: " + current + "]").c_str());
    }
  }
  return kExitOk;
}

}  // namespace tictac::cli
