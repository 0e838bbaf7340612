#include "transport/wire.h"

#include <cstdio>
#include <string>

namespace tictac::transport::wire {
namespace {

Status bad(const std::string& what) {
  return Status(StatusCode::protocol_error, "malformed frame header: " + what);
}

bool known_type(std::uint8_t t) {
  return t >= static_cast<std::uint8_t>(FrameType::hello) &&
         t <= static_cast<std::uint8_t>(FrameType::mac);
}

}  // namespace

std::string_view to_string(FrameType type) {
  switch (type) {
    case FrameType::hello: return "HELLO";
    case FrameType::announce: return "ANNOUNCE";
    case FrameType::ready: return "READY";
    case FrameType::data: return "DATA";
    case FrameType::credit: return "CREDIT";
    case FrameType::reject: return "REJECT";
    case FrameType::abort: return "ABORT";
    case FrameType::heartbeat: return "HEARTBEAT";
    case FrameType::auth: return "AUTH";
    case FrameType::advert: return "ADVERT";
    case FrameType::mac: return "MAC";
  }
  return "UNKNOWN";
}

HeaderBytes encode(const Header& h) {
  HeaderBytes out{};
  std::byte* p = out.data();
  put_le(p + 0, h.magic, 4);
  put_le(p + 4, h.version, 2);
  put_le(p + 6, static_cast<std::uint8_t>(h.type), 1);
  put_le(p + 7, h.flags, 1);
  put_le(p + 8, h.tag, 8);
  put_le(p + 16, h.msg_id, 8);
  put_le(p + 24, h.offset, 8);
  put_le(p + 32, h.total, 8);
  put_le(p + 40, static_cast<std::uint64_t>(h.priority), 8);
  put_le(p + 48, h.length, 4);
  put_le(p + 52, h.aux, 4);
  return out;
}

Result<Header> decode(std::span<const std::byte> bytes) {
  if (bytes.size() < kHeaderBytes) {
    return bad("truncated: got " + std::to_string(bytes.size()) + " of " +
               std::to_string(kHeaderBytes) + " header bytes");
  }
  const std::byte* p = bytes.data();
  Header h;
  h.magic = static_cast<std::uint32_t>(get_le(p + 0, 4));
  h.version = static_cast<std::uint16_t>(get_le(p + 4, 2));
  const auto type = static_cast<std::uint8_t>(get_le(p + 6, 1));
  h.flags = static_cast<std::uint8_t>(get_le(p + 7, 1));
  h.tag = get_le(p + 8, 8);
  h.msg_id = get_le(p + 16, 8);
  h.offset = get_le(p + 24, 8);
  h.total = get_le(p + 32, 8);
  h.priority = static_cast<std::int64_t>(get_le(p + 40, 8));
  h.length = static_cast<std::uint32_t>(get_le(p + 48, 4));
  h.aux = static_cast<std::uint32_t>(get_le(p + 52, 4));

  if (h.magic != kMagic) {
    return bad("bad magic 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%08x", h.magic);
      return std::string(buf);
    }() + " (the peer is not a TicTac transport, or the stream lost its framing)");
  }
  // The type sits at the same offset in every version; AUTH frames keep a frozen header version.
  const std::uint16_t expected =
      type == static_cast<std::uint8_t>(FrameType::auth) ? kHandshakeFrameVersion : kVersion;
  if (h.version != expected) {
    return bad("unsupported wire version " + std::to_string(h.version) + " (this build speaks " +
               std::to_string(expected) + "; run the same TicTac version on both sides)");
  }
  if (!known_type(type)) return bad("unknown frame type " + std::to_string(type));
  h.type = static_cast<FrameType>(type);
  const std::string name(to_string(h.type));
  const bool credit = (h.flags & kFlagCredit) != 0;
  if (credit && (h.type == FrameType::reject || h.type == FrameType::credit || h.type == FrameType::auth ||
                 h.type == FrameType::hello)) {
    return bad("credit flag not valid on " + name);
  }
  const std::uint8_t kind = h.flags & static_cast<std::uint8_t>(~kFlagCredit);
  const std::uint8_t base = kind & static_cast<std::uint8_t>(~kFlagInline);
  if (kind != 0 && !(h.type == FrameType::announce && (base == kFlagEager || base == kFlagClaimed))) {
    return bad("flags 0x" + std::to_string(h.flags) + " not valid on " + name);
  }
  if (credit && h.aux == 0) return bad("credit flag with zero credit bytes on " + name);
  if (!credit && h.aux != 0 && h.type != FrameType::reject) return bad("aux field set on " + name);
  const bool inline_data = h.type == FrameType::announce && (kind & kFlagInline) != 0;
  if (inline_data && (h.length == 0 || h.length > kMaxChunkBytes || h.length != h.total)) {
    return bad("inline ANNOUNCE payload of " + std::to_string(h.length) + " bytes for a message of " +
               std::to_string(h.total) + " bytes (must be the whole message, 1.." +
               std::to_string(kMaxChunkBytes) + ")");
  }

  switch (h.type) {
    case FrameType::hello:
      if (h.length == 0 || h.length > kMaxHelloBytes) {
        return bad("HELLO payload of " + std::to_string(h.length) + " bytes (1.." +
                   std::to_string(kMaxHelloBytes) + " allowed)");
      }
      break;
    case FrameType::auth:
      if (h.length == 0 || h.length > kMaxAuthBytes) {
        return bad("AUTH payload of " + std::to_string(h.length) + " bytes (1.." +
                   std::to_string(kMaxAuthBytes) + " allowed)");
      }
      break;
    case FrameType::data:
      if (h.length > kMaxChunkBytes) {
        return bad("DATA length " + std::to_string(h.length) + " exceeds the maximum chunk of " +
                   std::to_string(kMaxChunkBytes) + " bytes");
      }
      if (h.offset > h.total || h.length > h.total - h.offset) {
        return bad("DATA offset " + std::to_string(h.offset) + " + length " +
                   std::to_string(h.length) + " out of range for a message of " +
                   std::to_string(h.total) + " bytes");
      }
      break;
    case FrameType::reject:
      if (h.aux == 0 || h.aux > static_cast<std::uint32_t>(StatusCode::internal)) {
        return bad("REJECT with invalid status code " + std::to_string(h.aux));
      }
      [[fallthrough]];
    default:
      if (h.length != 0 && !inline_data) {
        return bad(name + " must carry no payload, has length " + std::to_string(h.length));
      }
      break;
  }
  if (h.type == FrameType::credit && h.total == 0) return bad("CREDIT of zero bytes");
  if (h.type == FrameType::advert && (h.msg_id == 0 || h.priority < 0)) {
    return bad("ADVERT with number " + std::to_string(h.msg_id) + " and " + std::to_string(h.priority) +
               " receives ahead");
  }
  if (h.type == FrameType::announce && base != kFlagClaimed && h.offset != 0) {
    return bad("ANNOUNCE that claims no advert carries offset " + std::to_string(h.offset));
  }
  return h;
}

Status check_data_fits(const Header& h, std::uint64_t expected_offset,
                       std::uint64_t posted_bytes) {
  if (h.offset != expected_offset) {
    return Status(StatusCode::protocol_error,
                  "DATA offset " + std::to_string(h.offset) + " out of range: message " +
                      std::to_string(h.msg_id) + " expects its next chunk at offset " +
                      std::to_string(expected_offset));
  }
  if (h.offset > posted_bytes || h.length > posted_bytes - h.offset) {
    return Status(StatusCode::protocol_error,
                  "DATA length " + std::to_string(h.length) + " at offset " +
                      std::to_string(h.offset) + " goes beyond the posted buffer of " +
                      std::to_string(posted_bytes) + " bytes");
  }
  return Status::Ok();
}

}  // namespace tictac::transport::wire
