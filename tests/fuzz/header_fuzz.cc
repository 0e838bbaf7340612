// libFuzzer target: arbitrary bytes into the wire header parser (wire::decode), the DATA range
// check against a posted buffer (wire::check_data_fits) and the HELLO body parser
// (decode_hello / verify_hello).
//
// Input layout: bytes [0, 56) are a frame header, the next 16 bytes the receiver's expected
// offset and posted buffer size, the rest a HELLO body (each part may be short or missing).
// Properties checked (a violation aborts, which libFuzzer reports): nothing crashes, overflows or
// reads out of bounds (ASan/UBSan); every error is a protocol_error; an accepted header
// re-encodes to exactly the bytes it came from and keeps every promise decode() makes (known
// type, allowed flags/aux, payload sizes, DATA within its message); check_data_fits() only
// passes a chunk that starts at the expected offset and ends inside the posted buffer, without
// overflowing; an accepted HELLO body re-encodes to exactly itself and has a sane name.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "transport/handshake.h"
#include "transport/wire.h"

namespace {

using namespace tictac::transport;

void check(bool ok) {
  if (!ok) std::abort();
}

std::uint64_t le64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

void check_header_promises(const wire::Header& h) {
  check(wire::to_string(h.type) != "UNKNOWN");
  check(h.magic == wire::kMagic);
  check(h.version == (h.type == wire::FrameType::auth ? wire::kHandshakeFrameVersion : wire::kVersion));
  const bool credit = (h.flags & wire::kFlagCredit) != 0;
  const std::uint8_t kind = h.flags & static_cast<std::uint8_t>(~wire::kFlagCredit);
  const std::uint8_t base = kind & static_cast<std::uint8_t>(~wire::kFlagInline);
  const bool inline_data = h.type == wire::FrameType::announce && (kind & wire::kFlagInline) != 0;
  check(kind == 0 || (h.type == wire::FrameType::announce &&
                      (base == wire::kFlagEager || base == wire::kFlagClaimed)));
  if (h.type == wire::FrameType::announce && base != wire::kFlagClaimed) check(h.offset == 0);
  if (h.type == wire::FrameType::advert) check(h.msg_id != 0 && h.priority >= 0 && h.length == 0);
  if (credit) {
    check(h.aux != 0 && h.type != wire::FrameType::reject && h.type != wire::FrameType::credit &&
          h.type != wire::FrameType::auth && h.type != wire::FrameType::hello);
  } else {
    check(h.aux == 0 || h.type == wire::FrameType::reject);
  }
  if (inline_data) check(h.length >= 1 && h.length <= wire::kMaxChunkBytes && h.length == h.total);
  switch (h.type) {
    case wire::FrameType::hello: check(h.length >= 1 && h.length <= wire::kMaxHelloBytes); break;
    case wire::FrameType::auth: check(h.length >= 1 && h.length <= wire::kMaxAuthBytes); break;
    case wire::FrameType::data:
      check(h.length <= wire::kMaxChunkBytes);
      check(h.offset <= h.total && h.length <= h.total - h.offset);
      break;
    case wire::FrameType::reject: check(h.aux != 0 && h.length == 0); break;
    case wire::FrameType::credit: check(h.total != 0 && h.length == 0); break;
    default: check(h.length == 0 || inline_data); break;
  }
}

void check_fits(const wire::Header& h, std::uint64_t expected, std::uint64_t posted) {
  tictac::Status st = wire::check_data_fits(h, expected, posted);
  if (!st.ok()) {
    check(st.code() == tictac::StatusCode::protocol_error);
    return;
  }
  check(h.offset == expected);
  check(h.offset <= posted && h.length <= posted - h.offset);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  const std::size_t header_bytes = size < wire::kHeaderBytes ? size : wire::kHeaderBytes;

  // The header.
  tictac::Result<wire::Header> h = wire::decode(std::span<const std::byte>(bytes, header_bytes));
  if (header_bytes < wire::kHeaderBytes) check(!h.ok());
  if (!h.ok()) {
    check(h.status().code() == tictac::StatusCode::protocol_error);
  } else {
    check_header_promises(*h);
    const wire::HeaderBytes again = wire::encode(*h);
    check(std::memcmp(again.data(), data, wire::kHeaderBytes) == 0);
  }

  // DATA against a posted buffer: with the decoded header, and with raw unvalidated fields
  // (check_data_fits must stay overflow-safe whatever it is given).
  if (size >= wire::kHeaderBytes + 16) {
    const std::uint64_t expected = le64(data + wire::kHeaderBytes);
    const std::uint64_t posted = le64(data + wire::kHeaderBytes + 8);
    wire::Header raw;
    raw.offset = le64(data + 24);
    raw.length = static_cast<std::uint32_t>(le64(data + 48));
    raw.total = le64(data + 32);
    raw.msg_id = le64(data + 16);
    check_fits(raw, expected, posted);
    check_fits(raw, raw.offset, posted);  // the in-order case, which reaches the range check
    if (h.ok() && h->type == wire::FrameType::data) check_fits(*h, h->offset, posted);
  }

  // The HELLO body: everything after the header and the two numbers (or the whole input when
  // it is shorter, so that small inputs exercise it too).
  const std::size_t body_at = size >= wire::kHeaderBytes + 16 ? wire::kHeaderBytes + 16 : 0;
  const std::span<const std::byte> body(bytes + body_at, size - body_at);
  tictac::Result<HelloInfo> hello = decode_hello(body);
  if (!hello.ok()) {
    check(hello.status().code() == tictac::StatusCode::protocol_error);
    return 0;
  }
  check(!hello->name.empty() && hello->name.size() <= kMaxNameBytes);
  check(hello->name.find('\0') == std::string::npos);
  const std::vector<std::byte> again = encode_hello(*hello);
  check(again.size() == body.size() && std::memcmp(again.data(), body.data(), body.size()) == 0);
  tictac::Status verdict = verify_hello(*hello, *hello);
  check(verdict.ok() || verdict.code() == tictac::StatusCode::protocol_error);
  return 0;
}
