#include "common/status.h"

#include <cstring>

namespace tictac {

std::string_view to_string(StatusCode code) {
  switch (code) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid_argument";
    case StatusCode::unavailable: return "unavailable";
    case StatusCode::connection_lost: return "connection_lost";
    case StatusCode::timeout: return "timeout";
    case StatusCode::cancelled: return "cancelled";
    case StatusCode::resource_exhausted: return "resource_exhausted";
    case StatusCode::protocol_error: return "protocol_error";
    case StatusCode::cuda_error: return "cuda_error";
    case StatusCode::internal: return "internal";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message, std::string origin)
    : code_(code), message_(std::move(message)), origin_(std::move(origin)) {}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out(tictac::to_string(code_));
  out += ": ";
  out += message_;
  if (!origin_.empty()) {
    out += " (";
    out += origin_;
    out += ")";
  }
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  return Status(code_, std::move(msg), origin_);
}

Status invalid_argument(std::string message) {
  return Status(StatusCode::invalid_argument, std::move(message));
}

Status internal_error(std::string message) {
  return Status(StatusCode::internal, std::move(message));
}

Status errno_status(StatusCode code, std::string_view what, std::string_view syscall, int err) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  std::string origin(syscall);
  origin += " errno=" + std::to_string(err);
  return Status(code, std::move(msg), std::move(origin));
}

}  // namespace tictac
