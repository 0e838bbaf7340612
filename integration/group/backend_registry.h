// Backend registry: the transport backends this build contains, by name, each registered by a
// small file of its own (integration/group/backends/*.cc, linked whole so that the registration
// runs at static initialisation). Users look backends up by name instead of keeping #ifdef lists.
//
//   const BackendEntry* e = find_backend("ucx");   // null = this name is unknown
//   if (e->create) { auto b = e->create(); ... } else { /* e->missing says why and the fix */ }
//
// An entry without `create` is a backend this build lacks (e.g. "built without libucx: install
// libucx-dev and rebuild"), so errors can name the cause. Registration happens before main();
// lookups afterwards are thread-safe (the table is never written again).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transport/backend.h"

namespace tictac::group {

struct BackendEntry {
  std::string name;  // also the address scheme: "<name>://host:port"
  std::function<std::unique_ptr<transport::Backend>()> create;  // empty = not in this build
  std::string missing;  // why not in this build, and the fix (only when `create` is empty)
};

// Static-initialisation time only. A duplicate name keeps the entry with `create`.
bool register_backend(BackendEntry entry);
// The entry named `name`, or null.
const BackendEntry* find_backend(std::string_view name);
// Every registered entry, sorted by name.
std::vector<const BackendEntry*> registered_backends();

}  // namespace tictac::group
