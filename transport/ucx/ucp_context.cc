#include "transport/ucx/ucp_context.h"

#include <cstdlib>
#include <string>

#include "transport/ucx/memory.h"
#include "transport/ucx/ucs_status.h"

namespace tictac::transport::ucx {
namespace {

// Whether a UCX_TLS value can select a shared-memory transport (UCX warns about MM settings
// when none is in use).
bool may_use_shared_memory(const char* tls) {
  if (tls == nullptr || *tls == '\0') return true;
  const std::string t(tls);
  for (const char* word : {"sm", "shm", "posix", "sysv", "all", "^"}) {
    if (t.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

Result<std::shared_ptr<UcpContext>> UcpContext::create() {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) {
    return from_ucs(StatusCode::unavailable, "cannot read the UCX configuration (check the UCX_* variables)", st);
  }
  // Peer error handling (every endpoint uses it) rules out UCX 1.13's shared-memory transports
  // unless their process-liveness check is on: without this, endpoints silently fall back to TCP
  // even with UCX_TLS=sm,tcp. An explicit UCX_MM_ERROR_HANDLING wins; an older UCX that lacks the
  // key just keeps its default.
  if (std::getenv("UCX_MM_ERROR_HANDLING") == nullptr && may_use_shared_memory(std::getenv("UCX_TLS"))) {
    (void)ucp_config_modify(config, "MM_ERROR_HANDLING", "y");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;  // one worker per progress engine, used by its loop thread only
  params.name = "tictac";
  ucp_context_h context = nullptr;
  st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (st != UCS_OK) {
    return from_ucs(StatusCode::unavailable,
                    "ucp_init failed (no usable UCX transport? check UCX_TLS and `ucx_info -d`)", st);
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  std::uint64_t types = UCS_BIT(UCS_MEMORY_TYPE_HOST);
  if (ucp_context_query(context, &attr) == UCS_OK) types = attr.memory_types;
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  std::string desc = "UCX " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release) +
                     " (memory: " + describe_memory_types(types) + ")";
  const char* tls = std::getenv("UCX_TLS");
  desc += std::string(", UCX_TLS=") + (tls != nullptr && *tls != '\0' ? tls : "all");
  return std::shared_ptr<UcpContext>(new UcpContext(context, types, std::move(desc)));
}

UcpContext::~UcpContext() { ucp_cleanup(context_); }

}  // namespace tictac::transport::ucx
