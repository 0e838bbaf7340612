// Wire format: one versioned, fixed-size frame header (56 bytes, little-endian) followed by
// `length` payload bytes. Every backend that moves frames (tcp, loopback) uses it; backends with
// their own headers (UCX active messages, verbs immediates) carry the same fields.
//
//   off size field     meaning
//     0   4  magic     kMagic ("TTAC")
//     4   2  version   kVersion
//     6   1  type      FrameType
//     7   1  flags     ANNOUNCE: kFlagEager or kFlagClaimed, either optionally with kFlagInline;
//                      any frame but REJECT, CREDIT, AUTH, HELLO: kFlagCredit
//     8   8  tag       user tag (ANNOUNCE, DATA, ADVERT)
//    16   8  msg_id    sender's message number on this connection (ANNOUNCE, DATA, READY, REJECT,
//                      ABORT); the advert's number (ADVERT)
//    24   8  offset    first payload byte's offset in the message (DATA); the advert claimed
//                      (ANNOUNCE with kFlagClaimed); the last message id the receiver had seen (ADVERT)
//    32   8  total     message length (ANNOUNCE, DATA), credit bytes (CREDIT), capacity (ADVERT)
//    40   8  priority  sender's priority, smaller first (ANNOUNCE, DATA); receives of the same
//                      (source, tag) waiting ahead of the advertised one (ADVERT, >= 0)
//    48   4  length    payload bytes after this header (AUTH, HELLO, DATA, inline ANNOUNCE)
//    52   4  aux       StatusCode of a REJECT; returned eager credit bytes (kFlagCredit); else 0
//
// AUTH frames (the authentication handshake, transport/auth/) always carry header version
// kHandshakeFrameVersion, in every release, and magic, version, type and length keep their
// offsets: a peer of another release can always read them, so a protocol-version mismatch is
// found inside the handshake, where both versions are named and the refusal reaches the peer.
// Every other frame carries kVersion.
//
// With TICTAC_AUTH_MAC=1 on both sides (negotiated in the handshake) every frame after the last
// AUTH frame is preceded by a MAC frame (type 11) carrying a 16-byte truncated HMAC-SHA256 tag
// over a per-direction sequence number and the next frame's encoded header
// (transport/frame_mac.h, docs/security.md). With it off no MAC frame is ever sent.
//
// decode() validates everything that can be checked without connection state and returns a
// protocol_error Status naming the field; check_data_fits() adds the checks against the posted
// destination. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/status.h"

namespace tictac::transport::wire {

inline constexpr std::uint32_t kMagic = 0x43415454;  // bytes "TTAC"
// 2: ADVERT and claimed ANNOUNCEs; 3: inline ANNOUNCEs (one frame per small message) and
// credit piggybacked on any frame (kFlagCredit).
inline constexpr std::uint16_t kVersion = 3;
inline constexpr std::uint16_t kHandshakeFrameVersion = 1;  // AUTH frames, frozen (see above)
inline constexpr std::size_t kHeaderBytes = 56;
inline constexpr std::uint32_t kMaxHelloBytes = 4096;
inline constexpr std::uint32_t kMaxAuthBytes = 1024;  // >= twice the largest handshake message
inline constexpr std::uint32_t kMaxChunkBytes = 1u << 30;
inline constexpr std::uint8_t kFlagEager = 0x1;
// ANNOUNCE of a message that claims the receiver's advert `offset`: its data follows at once.
inline constexpr std::uint8_t kFlagClaimed = 0x2;
// ANNOUNCE (eager or claimed) that carries the whole message as its payload (length == total,
// 1 .. kMaxChunkBytes): announcement and data in one frame; no DATA frame follows.
inline constexpr std::uint8_t kFlagInline = 0x4;
// The frame also returns `aux` (> 0) bytes of the receiver's eager pool to its sender, like a
// CREDIT frame would (any frame but REJECT, CREDIT, AUTH and HELLO).
inline constexpr std::uint8_t kFlagCredit = 0x8;
// Adverts a receiver may have outstanding on one connection (a sender refuses more).
inline constexpr std::uint32_t kMaxAdvertsOutstanding = 65536;

enum class FrameType : std::uint8_t {
  hello = 1,      // handshake: payload = handshake body (see handshake.h)
  announce = 2,   // a message exists: tag, msg_id, total, priority; eager flag = data follows now
  ready = 3,      // receiver bound msg_id to a posted receive: send the data
  data = 4,       // one chunk of msg_id at offset
  credit = 5,     // receiver freed `total` bytes of its eager pool
  reject = 6,     // receiver refuses msg_id (aux = StatusCode), e.g. receive buffer too small
  abort = 7,      // sender cancelled msg_id; no more data for it
  heartbeat = 8,  // liveness while idle
  auth = 9,       // authentication handshake bytes (transport/auth/ messages), before HELLO
  advert = 10,    // receiver: a receive for `tag` is posted (capacity `total`), see connection.h
  // TICTAC_AUTH_MAC only: the 16-byte tag authenticating the next frame, in `tag` and `msg_id`
  // (little-endian halves); every other field zero, no payload (transport/frame_mac.h).
  mac = 11,
};

std::string_view to_string(FrameType type);

struct Header {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  FrameType type = FrameType::heartbeat;
  std::uint8_t flags = 0;
  std::uint64_t tag = 0;
  std::uint64_t msg_id = 0;
  std::uint64_t offset = 0;
  std::uint64_t total = 0;
  std::int64_t priority = 0;
  std::uint32_t length = 0;
  std::uint32_t aux = 0;
};

using HeaderBytes = std::array<std::byte, kHeaderBytes>;

// Little-endian field access of `bytes` (1..8) bytes, as the header and the backends' own
// fixed-layout frames use.
inline void put_le(std::byte* out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}
inline std::uint64_t get_le(const std::byte* in, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return v;
}

// Serialises without validation (tests craft bad headers through this).
HeaderBytes encode(const Header& header);

// Parses and validates one header; `bytes` shorter than kHeaderBytes is "truncated".
Result<Header> decode(std::span<const std::byte> bytes);

// DATA against the receiver's state: the chunk must start at `expected_offset` (chunks of one
// message arrive in order) and end within the `posted_bytes` of the destination.
Status check_data_fits(const Header& header, std::uint64_t expected_offset,
                       std::uint64_t posted_bytes);

}  // namespace tictac::transport::wire
