#include "cli/args.h"

#include <cstdio>

#include "common/tunables.h"

namespace tictac::cli {

Result<Args> Args::parse(int argc, char** argv, int first) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return invalid_argument("unexpected argument '" + arg + "'; flags look like --name value");
    }
    arg = arg.substr(2);
    const std::size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      a.values_[arg.substr(0, eq)] = arg.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      a.values_[arg] = argv[++i];
    } else {
      a.values_[arg] = "";
    }
  }
  return a;
}

bool Args::flag(const std::string& name) {
  known_.insert(name);
  auto it = values_.find(name);
  if (it == values_.end()) return false;
  return it->second.empty() || it->second == "1" || it->second == "true";
}

std::optional<std::string> Args::get(const std::string& name) {
  known_.insert(name);
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& name, const std::string& def) {
  return get(name).value_or(def);
}

namespace {
template <typename T, typename Parse>
Result<T> typed(Args& a, const std::string& name, T def, Parse parse) {
  std::optional<std::string> v = a.get(name);
  if (!v.has_value()) return def;
  if (v->empty()) return invalid_argument("--" + name + " needs a value");
  Result<T> r = parse(*v);
  if (!r.ok()) return r.status().with_context("--" + name);
  return r;
}
}  // namespace

Result<double> Args::get_double(const std::string& name, double def) {
  return typed<double>(*this, name, def, parse_double);
}
Result<std::uint64_t> Args::get_size(const std::string& name, std::uint64_t def) {
  return typed<std::uint64_t>(*this, name, def, parse_size);
}
Result<std::int64_t> Args::get_int(const std::string& name, std::int64_t def) {
  return typed<std::int64_t>(*this, name, def, parse_int);
}

Status Args::finish() const {
  for (const auto& [name, value] : values_) {
    if (known_.count(name) == 0) {
      return invalid_argument("unknown flag --" + name + " (see tictac help)");
    }
  }
  return Status::Ok();
}

int report(const char* command, const Status& status) {
  if (status.ok()) return kExitOk;
  std::fprintf(stderr, "tictac %s: %s\n", command, status.to_string().c_str());
  return status.code() == StatusCode::invalid_argument ? kExitBadInput : kExitFailure;
}

}  // namespace tictac::cli
