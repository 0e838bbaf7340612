// Registers the UCX backend (compiled only when libucx was found; ucx_missing.cc otherwise).
#include "integration/group/backend_registry.h"
#include "transport/ucx/factory.h"

namespace tictac::group {
namespace {
[[maybe_unused]] const bool kRegistered =
    register_backend({"ucx", [] { return transport::ucx::create(); }, ""});
}  // namespace
}  // namespace tictac::group
