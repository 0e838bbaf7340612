#include "integration/group/backend_choice.h"

#include <algorithm>

#include "common/log.h"
#include "common/tunables.h"
#include "integration/group/backend_registry.h"

namespace tictac::group {
namespace {

const StringTunable kBackends{"TICTAC_BACKENDS", kDefaultBackends,
                              "transport backends a process group may use, in order of "
                              "preference (comma-separated: tcp, ucx, verbs); peers use the "
                              "first one both sides list"};

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const auto last = s.find_last_not_of(" \t");
  return std::string(s.substr(first, last - first + 1));
}

std::string known_names() {
  std::string out;
  for (const BackendEntry* e : registered_backends()) out += (out.empty() ? "" : ", ") + e->name;
  return out;
}

}  // namespace

Result<std::vector<std::string>> parse_backend_list(std::string_view text,
                                                    std::string_view source) {
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    std::string name = trim(text.substr(start, comma - start));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!name.empty()) {
      if (find_backend(name) == nullptr) {
        return invalid_argument(std::string(source) + "='" + std::string(text) +
                                "' names an unknown backend '" + name +
                                "'; known: " + known_names());
      }
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    start = comma + 1;
  }
  if (names.empty()) {
    return invalid_argument(std::string(source) + "='" + std::string(text) +
                            "' names no backend; use e.g. " + kDefaultBackends + " or ucx,tcp");
  }
  return names;
}

Result<BackendPlan> plan_backends(const std::string& list) {
  BackendPlan plan;
  std::string source = "backends";
  if (list.empty()) {
    Result<std::string> env = kBackends.get();
    TICTAC_RETURN_IF_ERROR(env);
    plan.requested = *env;
    source = "TICTAC_BACKENDS";
  } else {
    plan.requested = list;
  }
  Result<std::vector<std::string>> names = parse_backend_list(plan.requested, source);
  TICTAC_RETURN_IF_ERROR(names);
  for (const std::string& name : *names) {
    const BackendEntry* entry = find_backend(name);
    if (!entry->create) {
      plan.skipped.push_back(name + ": " + entry->missing);
      continue;
    }
    std::unique_ptr<transport::Backend> backend = entry->create();
    const transport::Viability v = backend->viability();
    if (!v.viable) {
      plan.skipped.push_back(name + ": not viable here (" + v.reason + ")");
      continue;
    }
    plan.names.push_back(name);
    plan.backends.push_back(std::move(backend));
  }
  std::string why;
  for (const std::string& s : plan.skipped) why += (why.empty() ? "" : "; ") + s;
  if (plan.backends.empty()) {
    return Status(StatusCode::unavailable,
                  source + "='" + plan.requested + "': no listed backend can be used (" + why +
                      "); fix the cause or list another backend, e.g. " + source + "=" +
                      (plan.requested.find("tcp") == std::string::npos ? plan.requested + ",tcp"
                                                                       : std::string("tcp")));
  }
  if (!plan.skipped.empty()) {
    TICTAC_LOG(warn) << source << "='" << plan.requested << "': skipping " << why << "; using "
                     << plan.names.front();
  }
  return plan;
}

std::string join_addresses(const std::vector<std::string>& addresses) {
  std::string out;
  for (const std::string& a : addresses) out += (out.empty() ? "" : ",") + a;
  return out;
}

std::vector<std::string> split_addresses(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string scheme_of(std::string_view address) {
  const std::size_t sep = address.find("://");
  return sep == std::string_view::npos ? "" : std::string(address.substr(0, sep));
}

std::string pick_address(const std::vector<std::string>& preference,
                         const std::vector<std::string>& offered) {
  for (const std::string& name : preference) {
    for (const std::string& addr : offered) {
      if (scheme_of(addr) == name) return addr;
    }
  }
  return "";
}

std::string with_scheme(std::string_view address, std::string_view scheme) {
  const std::size_t sep = address.find("://");
  const std::string_view rest = sep == std::string_view::npos ? address : address.substr(sep + 3);
  return std::string(scheme) + "://" + std::string(rest);
}

}  // namespace tictac::group
