#include "priority/graph_json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string_view>

#include "common/json.h"

namespace tictac::priority {
namespace {

constexpr std::uint64_t kMaxFileBytes = std::uint64_t{1} << 30;  // 1 GiB

std::string at(const json::Value& v) {
  std::string out = "(";  // appended step by step: GCC 12 misfires -Wrestrict on "(" + string&&
  out += v.where();
  out += ")";
  return out;
}

// Names an op in loader errors: "op 'name' (line L, column C)" or "op #i (line L, column C)".
std::string op_label(std::size_t index, const json::Value& op) {
  const json::Value* name = op.find("name");
  if (name != nullptr && name->is_string() && !name->as_string().empty()) {
    return "op '" + name->as_string() + "' " + at(op);  // the same shape as Graph::describe
  }
  return "op #" + std::to_string(index) + " " + at(op);
}

Status field_error(std::string_view source, const std::string& label, std::string_view field,
                   const json::Value& v, const std::string& what) {
  return invalid_argument(std::string(source) + ": " + label + ": field '" + std::string(field) +
                          "' " + at(v) + " " + what);
}

std::string got(const json::Value& v) {
  if (v.is_number()) return "got " + v.number_text();
  if (v.is_string()) return "got the string " + json::quoted(v.as_string());
  return "got " + std::string(json::to_string(v.type()));
}

Status parse_op(std::string_view source, std::size_t index, const json::Value& op, OpSpec& spec) {
  if (!op.is_object()) {
    return invalid_argument(std::string(source) + ": op #" + std::to_string(index) + " " + at(op) +
                            ": each op must be an object like {\"name\": ..., \"kind\": ...}, " +
                            got(op));
  }
  std::string label_text;  // built only when an error needs it
  auto label = [&]() -> const std::string& {
    if (label_text.empty()) label_text = op_label(index, op);
    return label_text;
  };
  spec.pos = SourcePos{op.line(), op.column()};
  bool has_kind = false;
  bool has_name = false;
  for (const json::Member& m : op.members()) {
    const json::Value& v = m.value;
    if (m.key == "name") {
      if (!v.is_string() || v.as_string().empty()) {
        return field_error(source, label(), m.key, v, "must be a non-empty string, " + got(v));
      }
      spec.name = v.as_string();
      has_name = true;
    } else if (m.key == "kind") {
      if (!v.is_string() || (v.as_string() != "recv" && v.as_string() != "compute")) {
        return field_error(source, label(), m.key, v, "must be \"recv\" or \"compute\", " + got(v));
      }
      spec.kind = v.as_string() == "recv" ? OpKind::recv : OpKind::compute;
      has_kind = true;
    } else if (m.key == "inputs") {
      if (!v.is_array()) {
        return field_error(source, label(), m.key, v, "must be an array of op names, " + got(v));
      }
      spec.inputs.reserve(v.items().size());
      for (const json::Value& in : v.items()) {
        if (!in.is_string() || in.as_string().empty()) {
          return field_error(source, label(), m.key, in,
                             "must list op names (non-empty strings), " + got(in));
        }
        spec.inputs.push_back(in.as_string());
      }
    } else if (m.key == "time") {
      if (!v.is_number() || v.as_number() < 0) {
        return field_error(source, label(), m.key, v,
                           "must be a number of seconds >= 0, " + got(v));
      }
      spec.time = v.as_number();
    } else if (m.key == "bytes") {
      const std::optional<std::uint64_t> b = v.as_uint64();
      if (!b.has_value()) {
        return field_error(source, label(), m.key, v,
                           "must be a non-negative integer below 2^64, " + got(v));
      }
      spec.bytes = *b;
    } else {
      return invalid_argument(
          std::string(source) + ": " + label() + ": unknown field " + json::quoted(m.key) +
          " (line " + std::to_string(m.line) + ", column " + std::to_string(m.column) +
          "); an op has only \"name\", \"kind\", \"inputs\", \"time\", \"bytes\"");
    }
  }
  if (!has_name) {
    return invalid_argument(std::string(source) + ": " + label() +
                            ": missing field 'name' (a non-empty, unique string)");
  }
  if (!has_kind) {
    return invalid_argument(std::string(source) + ": " + label() +
                            ": missing field 'kind' (\"recv\" or \"compute\")");
  }
  return Status::Ok();
}

void append_op(std::string& out, const Graph& g, const Op& op) {
  out += "    {\"name\": ";
  json::append_quoted(out, op.name);
  out += ", \"kind\": ";
  json::append_quoted(out, to_string(op.kind));
  if (!op.inputs.empty()) {
    out += ", \"inputs\": [";
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      if (i > 0) out += ", ";
      json::append_quoted(out, g.op(op.inputs[i]).name);
    }
    out += "]";
  }
  if (op.time.has_value()) {
    out += ", \"time\": ";
    out += json::format_double(*op.time);
  }
  if (op.bytes.has_value()) {
    out += ", \"bytes\": ";
    out += std::to_string(*op.bytes);
  }
  out += "}";
}

}  // namespace

Result<Graph> parse_graph_json(std::string_view text, std::string_view source) {
  const std::string src(source);
  Result<json::Value> doc = json::parse(text);
  if (!doc.ok()) return doc.status().with_context(src);
  const json::Value& top = *doc;
  const std::string expected_format = "\"format\": \"" + std::string(kGraphFormat) + "\"";
  if (!top.is_object()) {
    return invalid_argument(src + ": " + top.where() + ": the top level must be an object {" +
                            expected_format + ", \"ops\": [...]}, " + got(top));
  }
  const json::Value* format = nullptr;
  const json::Value* ops = nullptr;
  for (const json::Member& m : top.members()) {
    if (m.key == "format") {
      format = &m.value;
    } else if (m.key == "ops") {
      ops = &m.value;
    } else if (m.key == "name") {
      if (!m.value.is_string()) {
        return invalid_argument(src + ": " + m.value.where() +
                                ": top-level 'name' must be a string, " + got(m.value));
      }
    } else if (m.key == "meta") {
      if (!m.value.is_object()) {
        return invalid_argument(src + ": " + m.value.where() +
                                ": top-level 'meta' must be an object, " + got(m.value));
      }
    } else {
      return invalid_argument(src + ": line " + std::to_string(m.line) + ", column " +
                              std::to_string(m.column) + ": unknown top-level field " +
                              json::quoted(m.key) +
                              "; expected \"format\", \"ops\" and optionally \"name\", \"meta\"");
    }
  }
  if (format == nullptr) {
    return invalid_argument(src + ": missing the format tag; the top-level object needs " +
                            expected_format);
  }
  if (!format->is_string() || format->as_string() != kGraphFormat) {
    return invalid_argument(
        src + ": " + format->where() + ": unsupported format " +
        (format->is_string() ? json::quoted(format->as_string()) : got(*format)) + "; expected " +
        expected_format);
  }
  if (ops == nullptr || !ops->is_array()) {
    return invalid_argument(src + ": " + (ops == nullptr ? top.where() : ops->where()) +
                            ": the top-level object needs \"ops\": [ ... ] (an array of ops)" +
                            (ops == nullptr ? std::string() : ", " + got(*ops)));
  }
  std::vector<OpSpec> specs(ops->items().size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    TICTAC_RETURN_IF_ERROR(parse_op(src, i, ops->items()[i], specs[i]));
  }
  Result<Graph> g = Graph::build(std::move(specs));
  if (!g.ok()) return g.status().with_context(src);
  return g;
}

Result<Graph> load_graph_file(const std::string& path) {
  const std::string what = "cannot read graph file '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(StatusCode::invalid_argument, what, "open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(StatusCode::invalid_argument, what, "fstat", err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return errno_status(StatusCode::invalid_argument, what, "open", EISDIR);
  }
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > kMaxFileBytes) {
    ::close(fd);
    return invalid_argument(what + ": it is " + std::to_string(st.st_size) +
                            " bytes; graph files are limited to 1 GiB");
  }
  std::string text;
  if (S_ISREG(st.st_mode)) text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return errno_status(StatusCode::invalid_argument, what, "read", err);
    }
    if (n == 0) break;
    if (text.size() + static_cast<std::size_t>(n) > kMaxFileBytes) {
      ::close(fd);
      return invalid_argument(what + ": it is larger than the 1 GiB limit for graph files");
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return parse_graph_json(text, path);
}

std::string graph_to_json(const Graph& graph) {
  std::string out;
  out.reserve(64 + graph.size() * 80);
  out += "{\n  \"format\": ";
  json::append_quoted(out, kGraphFormat);
  out += ",\n  \"ops\": [";
  for (OpId id = 0; id < graph.size(); ++id) {
    out += id == 0 ? "\n" : ",\n";
    append_op(out, graph, graph.op(id));
  }
  out += graph.size() == 0 ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

Status save_graph_file(const Graph& graph, const std::string& path) {
  const std::string text = graph_to_json(graph);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const std::string what = "cannot write graph file '" + path + "'";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(StatusCode::unavailable, what, "open", errno);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return errno_status(StatusCode::unavailable, what, "write", err);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return errno_status(StatusCode::unavailable, what, "close", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return errno_status(StatusCode::unavailable, what, "rename", err);
  }
  return Status::Ok();
}

}  // namespace tictac::priority
