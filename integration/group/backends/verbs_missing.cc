// Names the verbs backend in a build without the libibverbs headers.
#include "integration/group/backend_registry.h"

namespace tictac::group {
namespace {
[[maybe_unused]] const bool kRegistered = register_backend(
    {"verbs", nullptr, "this build has no verbs backend (libibverbs headers were not found at "
                       "configure time: install libibverbs-dev and rebuild)"});
}  // namespace
}  // namespace tictac::group
