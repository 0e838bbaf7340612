#include "transport/ucx/ucp_context.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "common/tunables.h"
#include "transport/ucx/memory.h"
#include "transport/ucx/ucs_status.h"

namespace tictac::transport::ucx {
namespace {

const StringTunable kRndvScheme{
    "TICTAC_UCX_RNDV_SCHEME", "",
    "UCX backend: UCX's rendezvous scheme (its RNDV_SCHEME) unless UCX_RNDV_SCHEME is set. Unset: "
    "put_zcopy where UCX_TLS allows only tcp (with self, cuda_copy or rocm_copy), get_zcopy "
    "otherwise. get_zcopy = the receiver reads the payload (over shared memory one CMA copy, over "
    "RDMA one read); auto = UCX's own choice, which on loopback puts rendezvous payloads on tcp "
    "(3x slower over shared memory)"};

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

// Whether UCX_TLS allows tcp and, for host memory, nothing else: tcp has no get, so get_zcopy
// rendezvous falls back to active-message fragments copied at the receiver, while put_zcopy
// writes into the destination (4 MiB over loopback tcp: 66-79 % of ucx_perftest against 61-71 %,
// paired runs in docs/ucx.md).
bool tcp_only(const char* tls) {
  if (tls == nullptr || *tls == '\0') return false;
  std::string t(tls);
  bool has_tcp = false;
  std::size_t start = 0;
  while (start <= t.size()) {
    const std::size_t comma = std::min(t.find(',', start), t.size());
    const std::string word = t.substr(start, comma - start);
    if (word == "tcp") {
      has_tcp = true;
    } else if (word != "self" && word != "cuda_copy" && word != "rocm_copy" && !word.empty()) {
      return false;  // anything else (sm, rc, ud, dc, ib, ^..., all) may give a lane with get
    }
    start = comma + 1;
  }
  return has_tcp;
}

// TICTAC_UCX_RNDV_SCHEME, or the default for this UCX_TLS (above) when it is unset or empty.
std::string tictac_scheme(const char* tls) {
  Result<std::string> chosen = kRndvScheme.get();
  if (chosen.ok() && !chosen->empty()) return *chosen;
  return tcp_only(tls) ? "put_zcopy" : "get_zcopy";
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
  // Rendezvous payloads (frames above TICTAC_UCX_RNDV_THRESH) are read by the receiver. UCX 1.13's
  // auto scheme picks the put lane with the highest estimated bandwidth, which on a host is tcp's
  // (it estimates loopback above shared memory), so a payload that shared memory could copy once
  // crossed a socket instead: 3.0 against 9.3 GB/s at 4 MiB (docs/ucx.md). The backend moves
  // host memory only (UcxWorker::kMemoryType), where get_zcopy is also what auto means for tag
  // messages. With UCX_TLS=tcp alone, which has no get, get_zcopy would send rendezvous data as
  // active-message fragments copied at the receiver, so there the default is put_zcopy (tcp_only).
  std::string scheme = "UCX_RNDV_SCHEME";
  if (const char* user = std::getenv("UCX_RNDV_SCHEME"); user == nullptr || *user == '\0') {
    scheme = tictac_scheme(std::getenv("UCX_TLS"));
    st = ucp_config_modify(config, "RNDV_SCHEME", scheme.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return from_ucs(
          StatusCode::invalid_argument,
          "TICTAC_UCX_RNDV_SCHEME=" + scheme +
              " is not a UCX rendezvous scheme (use get_zcopy, put_zcopy or auto, or "
              "unset it for the default by UCX_TLS; see `ucx_info -c | grep RNDV_SCHEME`)",
          st);
    }
  } else {
    scheme = std::string(user) + " (UCX_RNDV_SCHEME)";
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
  desc += ", rendezvous " + scheme;
  return std::shared_ptr<UcpContext>(new UcpContext(context, types, std::move(desc)));
}

UcpContext::~UcpContext() { ucp_cleanup(context_); }

}  // namespace tictac::transport::ucx
