#include "transport/handshake.h"

#include <algorithm>

namespace tictac::transport {
namespace {

constexpr std::uint32_t kBodyMagic = 0x4f4c4548;  // "HELO"
constexpr std::uint16_t kBodyVersion = 1;
constexpr std::size_t kFixed = 16;

void put(std::vector<std::byte>& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}
std::uint64_t get(const std::byte* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
Status bad(const std::string& what) {
  return Status(StatusCode::protocol_error, "malformed HELLO: " + what);
}

}  // namespace

std::vector<std::byte> encode_hello(const HelloInfo& info) {
  std::vector<std::byte> out;
  const std::size_t n = std::min(info.name.size(), kMaxNameBytes);
  put(out, kBodyMagic, 4);
  put(out, kBodyVersion, 2);
  put(out, n, 2);
  put(out, info.eager_bytes, 8);
  for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<std::byte>(info.name[i]));
  return out;
}

Result<HelloInfo> decode_hello(std::span<const std::byte> body) {
  if (body.size() < kFixed) return bad("body of " + std::to_string(body.size()) + " bytes is truncated");
  if (get(body.data(), 4) != kBodyMagic) return bad("bad body magic");
  const auto version = get(body.data() + 4, 2);
  if (version != kBodyVersion) {
    return bad("body version " + std::to_string(version) + " unsupported (this build speaks " +
               std::to_string(kBodyVersion) + ")");
  }
  const auto n = get(body.data() + 6, 2);
  if (n == 0 || n > kMaxNameBytes) return bad("name length " + std::to_string(n) + " out of range");
  if (body.size() != kFixed + n) {
    return bad("body is " + std::to_string(body.size()) + " bytes, expected " + std::to_string(kFixed + n));
  }
  HelloInfo info;
  info.eager_bytes = get(body.data() + 8, 8);
  info.name.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const char c = static_cast<char>(body[kFixed + i]);
    if (c == '\0') return bad("name contains a NUL byte");
    info.name.push_back(c);
  }
  return info;
}

Status verify_hello(const HelloInfo& /*local*/, const HelloInfo& peer) {
  if (peer.eager_bytes > (std::uint64_t{1} << 40)) {
    return bad("peer '" + peer.name + "' advertises an eager pool of " +
               std::to_string(peer.eager_bytes) + " bytes");
  }
  return Status::Ok();
}

}  // namespace tictac::transport
