// Registers the RDMA verbs backend (compiled only when the libibverbs headers were found;
// verbs_missing.cc otherwise). Its viability() says whether a device is usable here.
#include "integration/group/backend_registry.h"
#include "transport/verbs/backend/factory.h"

namespace tictac::group {
namespace {
[[maybe_unused]] const bool kRegistered =
    register_backend({"verbs", [] { return verbs::create(); }, ""});
}  // namespace
}  // namespace tictac::group
