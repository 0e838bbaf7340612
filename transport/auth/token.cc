#include "transport/auth/token.h"

#include "common/tunables.h"

namespace tictac::auth {

TokenTunable::TokenTunable(const char* name, const char* help) : name_(name) {
  register_tunable(TunableInfo{name, "unset", help});
}

Result<std::optional<std::string>> TokenTunable::get() const {
  std::string value = env_or_empty(name_);
  if (value.empty()) return std::optional<std::string>();
  TICTAC_RETURN_IF_ERROR(validate_token(value, name_));
  return std::optional<std::string>(std::move(value));
}

Status validate_token(std::string_view token, std::string_view source) {
  if (token.size() < kMinTokenBytes) {
    return invalid_argument(std::string(source) + " is " + std::to_string(token.size()) +
                            " bytes; an auth token needs at least " + std::to_string(kMinTokenBytes) +
                            " bytes (generate one with `openssl rand -hex 32`)");
  }
  if (token.size() > kMaxTokenBytes) {
    return invalid_argument(std::string(source) + " is " + std::to_string(token.size()) +
                            " bytes; an auth token may be at most " + std::to_string(kMaxTokenBytes) + " bytes");
  }
  return Status::Ok();
}

}  // namespace tictac::auth
