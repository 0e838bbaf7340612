// The cryptographic pieces of the handshake, as pure functions over OpenSSL's libcrypto.
//
//   proof = HMAC-SHA256(token, "tictac-auth-v1" || role || own_nonce || peer_nonce)
// where role is one byte (1 initiator, 2 acceptor) naming the side that computes the proof.
// Including the role means a proof can never be reflected back as the other side's proof.
// Thread-safe: no shared state.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"

namespace tictac::auth {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kMacBytes = 32;
inline constexpr std::string_view kProofContext = "tictac-auth-v1";
inline constexpr std::string_view kSessionKeyContext = "tictac-mac-v1";

using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Mac = std::array<std::uint8_t, kMacBytes>;

enum class Role : std::uint8_t { initiator = 1, acceptor = 2 };
const char* role_name(Role role);

// 32 bytes from RAND_bytes; internal error when the system RNG fails.
Result<Nonce> random_nonce();
Result<Mac> compute_proof(std::string_view token, Role prover, const Nonce& prover_nonce,
                          const Nonce& verifier_nonce);
// The frame-MAC key of one direction of a connection (TICTAC_AUTH_MAC):
//   key = HMAC-SHA256(token, "tictac-mac-v1" || nonce_initiator || nonce_acceptor || sender)
// where sender is the role byte of the side that sends (and tags) the frames.
using SessionKey = std::array<std::uint8_t, kMacBytes>;
Result<SessionKey> derive_session_key(std::string_view token, const Nonce& initiator_nonce,
                                      const Nonce& acceptor_nonce, Role sender);
// Constant-time comparison (CRYPTO_memcmp).
bool macs_equal(const Mac& a, const Mac& b);

}  // namespace tictac::auth
