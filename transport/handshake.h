// Connection handshake, second half: once the authentication handshake (transport/auth/, carried
// in AUTH frames; see connection.h) has passed, each side sends one HELLO; nothing but AUTH and
// then HELLO is accepted before the peer's HELLO has arrived. The frame header already checks
// magic and wire version; the HELLO body (below) carries the peer's name and its eager-pool size
// (our send credit towards it).
//
//   off size field
//     0   4  body magic  "HELO"
//     4   2  body version (1)
//     6   2  name length n (1..kMaxNameBytes)
//     8   8  eager bytes the peer reserves for us
//    16   n  name (UTF-8, no NUL)
//
// Versions and tokens were checked by the AUTH exchange before any HELLO is read; verify_hello()
// is the last check on what the (by then authenticated, when a token is set) peer says about
// itself. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace tictac::transport {

inline constexpr std::size_t kMaxNameBytes = 256;

struct HelloInfo {
  std::string name;
  std::uint64_t eager_bytes = 0;
};

std::vector<std::byte> encode_hello(const HelloInfo& info);
// protocol_error naming the defect for anything malformed.
Result<HelloInfo> decode_hello(std::span<const std::byte> body);
// Decides whether the peer that sent `peer` may talk to us (refuses an absurd eager pool; the
// version and the token were settled by the AUTH exchange). protocol_error when refused.
Status verify_hello(const HelloInfo& local, const HelloInfo& peer);

}  // namespace tictac::transport
