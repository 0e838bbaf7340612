#include "transport/auth/messages.h"

#include <algorithm>

namespace tictac::auth {
namespace {

Status malformed(const std::string& why) {
  return Status(StatusCode::protocol_error, "malformed handshake message: " + why);
}

Bytes header(std::uint16_t version, MessageType type, std::size_t body_len) {
  Bytes out;
  out.reserve(kHeaderBytes + body_len);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(kMagic >> (8 * i)));
  out.push_back(static_cast<std::uint8_t>(version));
  out.push_back(static_cast<std::uint8_t>(version >> 8));
  out.push_back(static_cast<std::uint8_t>(type));
  out.push_back(static_cast<std::uint8_t>(body_len));
  out.push_back(static_cast<std::uint8_t>(body_len >> 8));
  return out;
}

bool printable(std::uint8_t c) { return c >= 0x20 && c < 0x7f; }

}  // namespace

std::string sanitize(std::span<const std::uint8_t> text) {
  std::string out;
  out.reserve(text.size());
  for (std::uint8_t c : text) out.push_back(printable(c) ? static_cast<char>(c) : '?');
  return out;
}

Result<Header> parse_header(std::span<const std::uint8_t> bytes, std::uint16_t local_version) {
  if (bytes.size() < kHeaderBytes) {
    return malformed("header needs " + std::to_string(kHeaderBytes) + " bytes, got " +
                     std::to_string(bytes.size()));
  }
  std::uint32_t magic = 0;
  for (int i = 0; i < 4; ++i) magic |= std::uint32_t{bytes[i]} << (8 * i);
  if (magic != kMagic) {
    return malformed("bad magic (the peer is not a TicTac endpoint, or the stream is out of step)");
  }
  Header h;
  h.version = static_cast<std::uint16_t>(bytes[4] | (bytes[5] << 8));
  h.type = bytes[6];
  h.body_len = static_cast<std::uint16_t>(bytes[7] | (bytes[8] << 8));
  if (h.version != local_version) return h;
  switch (static_cast<MessageType>(h.type)) {
    case MessageType::hello:
      if (h.body_len != kHelloBodyBytes) {
        return malformed("hello body is " + std::to_string(h.body_len) + " bytes, expected " +
                         std::to_string(kHelloBodyBytes));
      }
      return h;
    case MessageType::proof:
      if (h.body_len != kProofBodyBytes) {
        return malformed("proof body is " + std::to_string(h.body_len) + " bytes, expected " +
                         std::to_string(kProofBodyBytes));
      }
      return h;
    case MessageType::result:
      if (h.body_len < 1 || h.body_len > 1 + kMaxReasonBytes) {
        return malformed("result body is " + std::to_string(h.body_len) + " bytes, expected 1.." +
                         std::to_string(1 + kMaxReasonBytes));
      }
      return h;
  }
  return malformed("unknown message type " + std::to_string(h.type));
}

Result<Hello> parse_hello(std::span<const std::uint8_t> body) {
  if (body.size() != kHelloBodyBytes) return malformed("hello body has the wrong size");
  Hello h;
  if (body[0] != static_cast<std::uint8_t>(Role::initiator) && body[0] != static_cast<std::uint8_t>(Role::acceptor)) {
    return malformed("hello names unknown role " + std::to_string(body[0]));
  }
  h.role = static_cast<Role>(body[0]);
  if ((body[1] & ~(kFlagHasToken | kFlagFrameMac)) != 0) {
    return malformed("hello sets unknown flag bits (flags byte " + std::to_string(body[1]) + ")");
  }
  h.has_token = (body[1] & kFlagHasToken) != 0;
  h.frame_mac = (body[1] & kFlagFrameMac) != 0;
  std::copy(body.begin() + 2, body.end(), h.nonce.begin());
  return h;
}

Result<Mac> parse_proof(std::span<const std::uint8_t> body) {
  if (body.size() != kProofBodyBytes) return malformed("proof body has the wrong size");
  Mac mac{};
  std::copy(body.begin(), body.end(), mac.begin());
  return mac;
}

Result<Outcome> parse_result(std::span<const std::uint8_t> body) {
  if (body.empty() || body.size() > 1 + kMaxReasonBytes) return malformed("result body has the wrong size");
  Outcome o;
  const auto reason = body.subspan(1);
  if (body[0] == 0) {
    if (!reason.empty()) return malformed("an accepting result carries a reason");
    o.accepted = true;
    return o;
  }
  if (body[0] != 1) return malformed("result has unknown outcome " + std::to_string(body[0]));
  if (reason.empty()) return malformed("a refusing result carries no reason");
  for (std::uint8_t c : reason) {
    if (!printable(c)) return malformed("refusal reason contains a non-printable byte");
  }
  o.reason.assign(reason.begin(), reason.end());
  return o;
}

Bytes encode_hello(std::uint16_t version, const Hello& hello) {
  Bytes out = header(version, MessageType::hello, kHelloBodyBytes);
  out.push_back(static_cast<std::uint8_t>(hello.role));
  out.push_back(static_cast<std::uint8_t>((hello.has_token ? kFlagHasToken : 0) |
                                          (hello.frame_mac ? kFlagFrameMac : 0)));
  out.insert(out.end(), hello.nonce.begin(), hello.nonce.end());
  return out;
}

Bytes encode_proof(std::uint16_t version, const Mac& mac) {
  Bytes out = header(version, MessageType::proof, kProofBodyBytes);
  out.insert(out.end(), mac.begin(), mac.end());
  return out;
}

Bytes encode_result(std::uint16_t version, const Outcome& outcome) {
  std::string reason;
  if (!outcome.accepted) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(outcome.reason.data());
    reason = sanitize({p, std::min(outcome.reason.size(), kMaxReasonBytes)});
    if (reason.empty()) reason = "refused";
  }
  Bytes out = header(version, MessageType::result, 1 + reason.size());
  out.push_back(outcome.accepted ? 0 : 1);
  out.insert(out.end(), reason.begin(), reason.end());
  return out;
}

}  // namespace tictac::auth
