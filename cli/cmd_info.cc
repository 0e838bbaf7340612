// `tictac info`: what this build contains and what is viable on this machine, like
// `ucx_info -d` or `ibv_devinfo`: each backend with "viable" or "not viable, because ...".
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "common/tunables.h"
#include "cuda/api.h"
#include "cuda/runtime_api.h"
#include "priority/schedule.h"
#include "transport/loopback/factory.h"
#include "transport/tcp/factory.h"
#ifdef TICTAC_HAVE_UCX
#include "transport/ucx/factory.h"
#endif
#ifdef TICTAC_HAVE_VERBS
#include "transport/verbs/backend/factory.h"
#endif

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

  const transport::Viability tcp = transport::tcp::create()->viability();
  print_backend("tcp", tcp.viable, tcp.reason);
  const transport::Viability lo =
      transport::loopback::create(transport::loopback::create_fabric())->viability();
  print_backend("loopback", lo.viable, lo.reason + " (tests and single-process runs)");
#ifdef TICTAC_HAVE_UCX
  const transport::Viability ucx = transport::ucx::create()->viability();
  print_backend("ucx", ucx.viable, ucx.viable ? ucx.reason : "ucx not viable: " + ucx.reason);
#else
  print_backend("ucx", false, "ucx not viable: built without libucx (install libucx-dev and rebuild)");
#endif
#ifdef TICTAC_HAVE_VERBS
  // The verbs backend: viable when libibverbs loads and a device has an ACTIVE port.
  const transport::Viability verbs = verbs::create()->viability();
  print_backend("verbs", verbs.viable, verbs.reason);
#else
  print_backend("verbs", false, "verbs not viable: built without libibverbs headers (install libibverbs-dev and rebuild)");
#endif
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
