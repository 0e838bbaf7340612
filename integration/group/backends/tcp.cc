// Registers the TCP backend (always built).
#include "integration/group/backend_registry.h"
#include "transport/tcp/factory.h"

namespace tictac::group {
namespace {
[[maybe_unused]] const bool kRegistered =
    register_backend({"tcp", [] { return transport::tcp::create(); }, ""});
}  // namespace
}  // namespace tictac::group
