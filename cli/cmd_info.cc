// `tictac info`: what this build contains and what is viable on this machine, like
// `ucx_info -d` or `ibv_devinfo`: each backend with "viable" or "not viable, because ...".
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "common/tunables.h"
#include "cuda/api.h"
#include "cuda/runtime_api.h"
#include "integration/group/backend_choice.h"
#include "integration/group/backend_registry.h"
#include "priority/schedule.h"
#include "transport/loopback/factory.h"

namespace tictac::cli {
namespace {

void print_backend(const char* name, bool viable, const std::string& reason) {
  std::printf("  %-9s %-11s %s\n", name, viable ? "viable" : "not viable", reason.c_str());
}

// Tunables whose values are secrets are listed but never echoed.
bool is_secret(const std::string& name) {
  return name.size() >= 6 && name.compare(name.size() - 6, 6, "_TOKEN") == 0;
}

}  // namespace

int run_info(Args& args) {
  const bool tunables = args.flag("tunables");
  if (Status s = args.finish(); !s.ok()) return report("info", s);
  std::printf("tictac %s\n", TICTAC_VERSION);
  std::printf("policies: %s\n\nbackends:\n", priority::policy_names().c_str());

  // Every backend of the registry (integration/group/backend_registry.h), built or not.
  for (const group::BackendEntry* e : group::registered_backends()) {
    if (!e->create) {
      print_backend(e->name.c_str(), false, e->name + " not viable: " + e->missing);
      continue;
    }
    const transport::Viability v = e->create()->viability();
    const std::string prefix = e->name + " not viable";
    print_backend(e->name.c_str(), v.viable,
                  v.viable || v.reason.rfind(prefix, 0) == 0 ? v.reason : prefix + ": " + v.reason);
  }
  const transport::Viability lo =
      transport::loopback::create(transport::loopback::create_fabric())->viability();
  print_backend("loopback", lo.viable, lo.reason + " (tests and single-process runs)");
  // What a process group would use here (TICTAC_BACKENDS).
  Result<group::BackendPlan> plan = group::plan_backends("");
  if (plan.ok()) {
    std::string chosen;
    for (const std::string& n : plan->names) chosen += (chosen.empty() ? "" : ",") + n;
    std::printf("\ngroup backends (TICTAC_BACKENDS=\"%s\"): %s\n", plan->requested.c_str(), chosen.c_str());
    for (const std::string& why : plan->skipped) std::printf("  skipped %s\n", why.c_str());
  } else {
    std::printf("\ngroup backends: %s\n", plan.status().to_string().c_str());
  }
  std::printf("\ncuda:\n  %s\n", cuda::describe(*cuda::open_runtime_api()).c_str());

  if (tunables) {
    std::printf("\ntunables (environment variables):\n");
    for (const TunableInfo& t : registered_tunables()) {
      const std::string current = env_or_empty(t.name.c_str());
      std::string shown;
      if (!current.empty()) shown = is_secret(t.name) ? " [set]" : " [set: " + current + "]";
      std::printf("  %-30s default %-10s %s%s\n", t.name.c_str(), t.default_text.c_str(),
                  t.help.c_str(), shown.c_str());
    }
  } else {
    std::printf("\n(--tunables lists the TICTAC_* environment variables)\n");
  }
  return kExitOk;
}

}  // namespace tictac::cli
