// libFuzzer target: arbitrary bytes into the TCP store's wire decoders
// (transport/bootstrap/tcp_store_protocol.h), as a server or client would receive them.
//
// The first input byte picks the decoder: frame length prefix, request body, or a response body
// for one of the ops. Properties checked (a violation aborts, which libFuzzer reports): nothing
// crashes or reads out of bounds (ASan/UBSan); a frame length that decodes is within
// kMaxFrameBodyBytes and non-zero; every accepted request/response respects the store's limits
// (key and value sizes, wait key count, auth bytes) and re-encodes to exactly the bytes that were
// decoded (the encoding is canonical, so the decoder accepts nothing the encoder cannot write).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "transport/bootstrap/tcp_store_protocol.h"

namespace {

using namespace tictac::bootstrap;

void check(bool ok) {
  if (!ok) std::abort();
}

bool same_body(const Bytes& frame, std::span<const std::uint8_t> body) {
  if (frame.size() != wire::kLengthPrefixBytes + body.size()) return false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (frame[wire::kLengthPrefixBytes + i] != body[i]) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  const std::span<const std::uint8_t> in(data + 1, size - 1);
  switch (mode % 8) {
    case 0: {
      if (in.size() < wire::kLengthPrefixBytes) return 0;
      tictac::Result<std::uint32_t> n = wire::decode_frame_length(in);
      if (n.ok()) check(*n > 0 && *n <= wire::kMaxFrameBodyBytes);
      return 0;
    }
    case 1: {
      tictac::Result<wire::Request> r = wire::decode_request(in);
      if (!r.ok()) {
        check(r.status().code() == tictac::StatusCode::protocol_error);
        return 0;
      }
      check(r->key.size() <= kMaxKeyBytes);
      check(r->keys.size() <= kMaxWaitKeys);
      for (const auto& k : r->keys) check(!k.empty() && k.size() <= kMaxKeyBytes);
      check(r->value.size() <= (r->op == wire::Op::auth ? wire::kMaxAuthBytes : kMaxValueBytes));
      check(same_body(wire::encode_request(*r), in));
      return 0;
    }
    default: {
      const auto op = static_cast<wire::Op>(1 + (mode % 8 - 2));  // hello..auth
      tictac::Result<wire::Response> r = wire::decode_response(op, in);
      if (!r.ok()) {
        check(r.status().code() == tictac::StatusCode::protocol_error);
        return 0;
      }
      check(same_body(wire::encode_response(op, *r), in));
      return 0;
    }
  }
}
