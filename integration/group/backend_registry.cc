#include "integration/group/backend_registry.h"

#include <algorithm>
#include <map>

namespace tictac::group {
namespace {

std::map<std::string, BackendEntry, std::less<>>& table() {
  static std::map<std::string, BackendEntry, std::less<>> entries;
  return entries;
}

}  // namespace

bool register_backend(BackendEntry entry) {
  auto& t = table();
  const auto it = t.find(entry.name);
  if (it != t.end() && it->second.create && !entry.create) return true;
  std::string name = entry.name;
  t.insert_or_assign(std::move(name), std::move(entry));
  return true;
}

const BackendEntry* find_backend(std::string_view name) {
  const auto& t = table();
  const auto it = t.find(name);
  return it == t.end() ? nullptr : &it->second;
}

std::vector<const BackendEntry*> registered_backends() {
  std::vector<const BackendEntry*> out;
  for (const auto& [name, entry] : table()) out.push_back(&entry);
  return out;
}

}  // namespace tictac::group
