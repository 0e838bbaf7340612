// Status and Result<T>: errors as values.
//
// Contract: every fallible call below the framework adapters returns a Status or a Result<T>.
// A Status carries a closed error code, a human message that names the cause (and, where it
// helps, the fix) and an origin (syscall + errno, peer, file:line). Statuses are cheap to copy
// when ok (no allocation). Thread-safe as values: no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace tictac {

enum class StatusCode : std::uint8_t {
  ok = 0,
  invalid_argument,
  unavailable,
  connection_lost,
  timeout,
  cancelled,
  resource_exhausted,
  protocol_error,
  cuda_error,
  internal,
};

// Stable lower-case name of a code, e.g. "protocol_error".
std::string_view to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message, std::string origin = {});

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& origin() const { return origin_; }

  // "code: message (origin)" or "ok".
  std::string to_string() const;

  // Returns a copy whose message is "context: message". No-op on ok.
  Status with_context(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
  std::string origin_;
};

// Shorthands that read well at call sites.
Status invalid_argument(std::string message);
Status internal_error(std::string message);
// A failed syscall: message "<what>: <strerror(err)>", origin "<syscall> errno=<err>".
Status errno_status(StatusCode code, std::string_view what, std::string_view syscall, int err);

// Result<T>: a T or a non-ok Status. Accessing value() of an error is a broken invariant.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) {
      v_ = Status(StatusCode::internal, "Result constructed from an ok Status without a value");
    }
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace tictac

// The one early-return macro: propagate a non-ok Status (or the Status of a Result).
#define TICTAC_RETURN_IF_ERROR(expr)                          \
  do {                                                        \
    const ::tictac::Status tictac_status_ = ::tictac::detail::status_of(expr); \
    if (!tictac_status_.ok()) return tictac_status_;          \
  } while (0)

namespace tictac::detail {
inline const Status& status_of(const Status& s) { return s; }
template <typename T>
const Status& status_of(const Result<T>& r) { return r.status(); }
}  // namespace tictac::detail
