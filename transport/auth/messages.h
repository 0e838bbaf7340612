// Handshake messages: layout, encoders and validating parsers. Pure functions, thread-safe.
//
// Every message starts with a 9-byte header; integers are little-endian:
//   off size field
//     0   4  magic     "TTHS"
//     4   2  version   the sender's protocol version
//     6   1  type      1 hello, 2 proof, 3 result
//     7   2  body_len  bytes that follow (exact per type, see below)
// Bodies:
//   hello  (34 bytes): role u8 (1 initiator, 2 acceptor) | flags u8 (bit 0: sender has a token;
//                      bit 1: sender wants frame MACs, TICTAC_AUTH_MAC; other bits zero) | nonce[32]
//   proof  (32 bytes): mac[32] = HMAC-SHA256 proof, see proof.h
//   result (1..1+kMaxReasonBytes): outcome u8 (0 accepted, 1 refused) | reason text
//                      (empty when accepted, non-empty printable ASCII when refused)
// magic and version sit at fixed offsets in every version, so a peer of another version is
// always recognised as such (parse_header reports the version before judging anything else).
// The largest message is 9 + 1 + kMaxReasonBytes bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/auth/proof.h"

namespace tictac::auth {

using Bytes = std::vector<std::uint8_t>;

inline constexpr std::uint32_t kMagic = 0x53485454;  // bytes "TTHS"
inline constexpr std::size_t kHeaderBytes = 9;
inline constexpr std::size_t kHelloBodyBytes = 2 + kNonceBytes;
inline constexpr std::size_t kProofBodyBytes = kMacBytes;
inline constexpr std::size_t kMaxReasonBytes = 512;
inline constexpr std::size_t kMaxMessageBytes = kHeaderBytes + 1 + kMaxReasonBytes;
inline constexpr std::uint8_t kFlagHasToken = 0x1;
inline constexpr std::uint8_t kFlagFrameMac = 0x2;  // never set when TICTAC_AUTH_MAC is off

enum class MessageType : std::uint8_t { hello = 1, proof = 2, result = 3 };

struct Header {
  std::uint16_t version = 0;
  std::uint8_t type = 0;       // raw; a MessageType once validated
  std::uint16_t body_len = 0;
};

struct Hello {
  Role role = Role::initiator;
  bool has_token = false;
  Nonce nonce{};
  bool frame_mac = false;  // the sender wants every later frame authenticated (TICTAC_AUTH_MAC)
};

struct Outcome {
  bool accepted = false;
  std::string reason;  // refused only
};

// Parses the first kHeaderBytes of `bytes` (which must hold at least that many). Checks the
// magic; when `version` equals `local_version` also checks the type and that body_len is valid
// for it. A different version is returned as is, for the caller to report with both numbers.
Result<Header> parse_header(std::span<const std::uint8_t> bytes, std::uint16_t local_version);
Result<Hello> parse_hello(std::span<const std::uint8_t> body);
Result<Mac> parse_proof(std::span<const std::uint8_t> body);
Result<Outcome> parse_result(std::span<const std::uint8_t> body);

Bytes encode_hello(std::uint16_t version, const Hello& hello);
Bytes encode_proof(std::uint16_t version, const Mac& mac);
// A refusal's reason is cut to kMaxReasonBytes and non-printable bytes become '?'.
Bytes encode_result(std::uint16_t version, const Outcome& outcome);

// Peer-supplied text made safe for logs: printable ASCII kept, anything else as '?'.
std::string sanitize(std::span<const std::uint8_t> text);

}  // namespace tictac::auth
