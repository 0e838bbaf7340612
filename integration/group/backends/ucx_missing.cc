// Names the UCX backend in a build without libucx, so that asking for it says why and the fix.
#include "integration/group/backend_registry.h"

namespace tictac::group {
namespace {
[[maybe_unused]] const bool kRegistered = register_backend(
    {"ucx", nullptr, "this build has no UCX backend (libucx was not found at configure time: "
                     "install libucx-dev and rebuild)"});
}  // namespace
}  // namespace tictac::group
