// The shared authentication token: TICTAC_AUTH_TOKEN, declared once here.
//
// A token is a secret shared by every process of one job (generate one with
// `openssl rand -hex 32`). It must be 16..1024 bytes: shorter tokens are refused because the
// handshake lets anyone who can connect collect MACs for an offline guessing attack (see
// docs/security.md). The value is never logged by this code.
// Thread-safe: reads the environment on every call; no state.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace tictac::auth {

inline constexpr std::size_t kMinTokenBytes = 16;
inline constexpr std::size_t kMaxTokenBytes = 1024;
inline constexpr const char* kAuthTokenEnv = "TICTAC_AUTH_TOKEN";

// A secret tunable in the style of common/tunables.h: registered (name, default "unset", help)
// so that `tictac info --tunables` lists it.
class TokenTunable {
 public:
  TokenTunable(const char* name, const char* help);
  const char* name() const { return name_; }
  // nullopt when the variable is unset or empty; invalid_argument when it is too short/long.
  Result<std::optional<std::string>> get() const;

 private:
  const char* name_;
};

inline const TokenTunable kAuthToken{
    kAuthTokenEnv,
    "shared secret (16..1024 bytes) that authenticates every connection with HMAC-SHA256; "
    "unset = no authentication; set the same value on all ranks"};

// Checks a token given explicitly (`source` names where it came from, for the message).
Status validate_token(std::string_view token, std::string_view source);

}  // namespace tictac::auth
