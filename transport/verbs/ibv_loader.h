// Loads libibverbs at run time and fills an IbvApi with it.
//
// Contract
// - Never links libibverbs: dlopen("libibverbs.so.1") once per process and dlvsym every entry
//   at a fixed symbol version (IBVERBS_1.1 for the base API, IBVERBS_1.0 for the completion
//   channel calls that were never re-versioned, IBVERBS_1.8 for ibv_reg_mr_iova2 and
//   IBVERBS_1.12 for ibv_reg_dmabuf_mr, which stay null when absent). Pinning versions keeps
//   the ABI we compiled against even when a newer library adds default versions.
// - Errors: a missing library or a missing required symbol is Status unavailable with the
//   message "verbs not viable: <reason>" that names the fix. Never crashes, never aborts.
// - Thread-safe: the first call loads under std::call_once; later calls return copies of the
//   same table (or the same error). The library handle stays open for the life of the process
//   (libibverbs cannot be unloaded safely once a provider is loaded; NCCL does the same).
#pragma once

#include "common/status.h"
#include "transport/verbs/ibv_api.h"

namespace tictac::verbs {

// The real table, or "verbs not viable: ..." (unavailable).
Result<IbvApi> load_libibverbs();

}  // namespace tictac::verbs
