// FrameMac: one direction's frame authentication for TICTAC_AUTH_MAC (docs/security.md).
//
//   tag = first 16 bytes of HMAC-SHA256(key, seq || wire::encode(header))
// seq: u64 little-endian, counting the authenticated frames of this direction from 0; key: the
// direction's session key from the handshake (auth::derive_session_key). The counter is implicit,
// so a replayed, dropped or reordered frame never verifies. The tag travels in a MAC frame
// (wire::FrameType::mac) right before the frame it covers; make_tag_frame()/parse_tag_frame()
// build and strictly check that frame (any field but the tag set = not a MAC frame we sent).
// Headers only: the payload is not covered.
// Errors: seal() internal if HMAC fails; verify() protocol_error "frame authentication failed:
// ..." (the caller prefixes the peer). Not thread-safe: one direction of one connection, used on
// its loop thread. The key is wiped when the object is destroyed.
#pragma once

#include <array>
#include <cstdint>

#include "common/status.h"
#include "transport/auth/proof.h"
#include "transport/wire.h"

typedef struct evp_mac_ctx_st EVP_MAC_CTX;  // OpenSSL's, declared in <openssl/types.h>

namespace tictac::transport {

class FrameMac {
 public:
  static constexpr std::size_t kTagBytes = 16;
  using Tag = std::array<std::uint8_t, kTagBytes>;

  // Keys an HMAC-SHA256 context once (per frame it is only reset, not re-keyed); a failure there
  // surfaces as internal from the first seal()/verify().
  explicit FrameMac(const auth::SessionKey& key);
  FrameMac(const FrameMac&) = delete;
  FrameMac& operator=(const FrameMac&) = delete;
  ~FrameMac();

  // The tag of the next frame sent (advances the sequence number).
  Result<Tag> seal(const wire::Header& header);
  // Checks `tag` against the next frame received (advances the sequence number only on success).
  Status verify(const wire::Header& header, const Tag& tag);
  std::uint64_t sequence() const { return seq_; }

  static wire::Header make_tag_frame(const Tag& tag);
  static Result<Tag> parse_tag_frame(const wire::Header& header);

 private:
  Result<Tag> compute(const wire::Header& header) const;

  EVP_MAC_CTX* ctx_ = nullptr;  // keyed; null if OpenSSL failed to set it up
  std::uint64_t seq_ = 0;
};

}  // namespace tictac::transport
