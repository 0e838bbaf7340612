#include "transport/auth/proof.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

namespace tictac::auth {
namespace {

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "no OpenSSL error queued";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

}  // namespace

const char* role_name(Role role) { return role == Role::initiator ? "initiator" : "acceptor"; }

Result<Nonce> random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) {
    return internal_error("RAND_bytes failed to produce a handshake nonce: " + openssl_error());
  }
  return n;
}

Result<Mac> compute_proof(std::string_view token, Role prover, const Nonce& prover_nonce,
                          const Nonce& verifier_nonce) {
  std::vector<std::uint8_t> input;
  input.reserve(kProofContext.size() + 1 + 2 * kNonceBytes);
  input.insert(input.end(), kProofContext.begin(), kProofContext.end());
  input.push_back(static_cast<std::uint8_t>(prover));
  input.insert(input.end(), prover_nonce.begin(), prover_nonce.end());
  input.insert(input.end(), verifier_nonce.begin(), verifier_nonce.end());
  Mac mac{};
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), input.data(), input.size(), mac.data(),
           &len) == nullptr ||
      len != kMacBytes) {
    return internal_error("HMAC-SHA256 failed: " + openssl_error());
  }
  return mac;
}

Result<SessionKey> derive_session_key(std::string_view token, const Nonce& initiator_nonce,
                                      const Nonce& acceptor_nonce, Role sender) {
  std::vector<std::uint8_t> input;
  input.reserve(kSessionKeyContext.size() + 2 * kNonceBytes + 1);
  input.insert(input.end(), kSessionKeyContext.begin(), kSessionKeyContext.end());
  input.insert(input.end(), initiator_nonce.begin(), initiator_nonce.end());
  input.insert(input.end(), acceptor_nonce.begin(), acceptor_nonce.end());
  input.push_back(static_cast<std::uint8_t>(sender));
  SessionKey key{};
  unsigned int len = 0;
  const bool ok = HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), input.data(),
                       input.size(), key.data(), &len) != nullptr &&
                  len == kMacBytes;
  OPENSSL_cleanse(input.data(), input.size());
  if (!ok) return internal_error("HMAC-SHA256 failed deriving a frame-MAC key: " + openssl_error());
  return key;
}

bool macs_equal(const Mac& a, const Mac& b) { return CRYPTO_memcmp(a.data(), b.data(), kMacBytes) == 0; }

}  // namespace tictac::auth
