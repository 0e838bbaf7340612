#include "transport/bootstrap/tcp_store_protocol.h"

#include <cstring>

namespace tictac::bootstrap::wire {
namespace {

class Writer {
 public:
  Writer() { out_.resize(kLengthPrefixBytes); }
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { fixed(v, 2); }
  void u32(std::uint32_t v) { fixed(v, 4); }
  void i64(std::int64_t v) { fixed(static_cast<std::uint64_t>(v), 8); }
  void bytes(const void* data, std::size_t n) {
    u32(static_cast<std::uint32_t>(n));
    const auto* p = static_cast<const std::uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  void str(const std::string& s) { bytes(s.data(), s.size()); }
  Bytes finish() {
    const std::uint64_t body = out_.size() - kLengthPrefixBytes;
    for (std::size_t i = 0; i < kLengthPrefixBytes; ++i) out_[i] = static_cast<std::uint8_t>(body >> (8 * i));
    return std::move(out_);
  }

 private:
  void fixed(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  Bytes out_;
};

// Bounds-checked reader; the first failure sticks and later reads return zeros.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  std::uint8_t u8(const char* what) { return static_cast<std::uint8_t>(fixed(1, what)); }
  std::uint16_t u16(const char* what) { return static_cast<std::uint16_t>(fixed(2, what)); }
  std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(fixed(4, what)); }
  std::int64_t i64(const char* what) { return static_cast<std::int64_t>(fixed(8, what)); }
  // A u32-length-prefixed byte string of at most `limit` bytes.
  std::span<const std::uint8_t> blob(const char* what, std::size_t limit) {
    const std::uint32_t n = u32(what);
    if (!ok()) return {};
    if (n > limit) {
      fail(std::string(what) + " length " + std::to_string(n) + " exceeds the limit of " + std::to_string(limit));
      return {};
    }
    if (n > in_.size() - pos_) {
      fail(std::string(what) + " length " + std::to_string(n) + " runs past the end of the frame");
      return {};
    }
    auto out = in_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  std::string key(const char* what) {
    auto b = blob(what, kMaxKeyBytes);
    if (ok() && b.empty()) fail(std::string(what) + " is empty");
    return std::string(b.begin(), b.end());
  }
  void expect_end() {
    if (ok() && pos_ != in_.size()) {
      fail(std::to_string(in_.size() - pos_) + " unexpected bytes after the last field");
    }
  }
  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }

 private:
  std::uint64_t fixed(std::size_t n, const char* what) {
    if (!ok()) return 0;
    if (in_.size() - pos_ < n) {
      fail(std::string("frame ends inside ") + what);
      return 0;
    }
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{in_[pos_ + i]} << (8 * i);
    pos_ += n;
    return v;
  }

  std::span<const std::uint8_t> in_;
  std::size_t pos_ = 0;
  std::string error_;
};

Status bad_frame(const std::string& what, const std::string& why) {
  return Status(StatusCode::protocol_error, "tcp store: malformed " + what + ": " + why);
}

}  // namespace

const char* op_name(Op op) {
  switch (op) {
    case Op::hello: return "hello";
    case Op::set: return "set";
    case Op::get: return "get";
    case Op::wait: return "wait";
    case Op::add: return "add";
    case Op::auth: return "auth";
  }
  return "unknown";
}

Bytes encode_request(const Request& r) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(r.op));
  switch (r.op) {
    case Op::hello:
      w.u32(r.magic);
      w.u16(r.version);
      break;
    case Op::set:
      w.str(r.key);
      w.bytes(r.value.data(), r.value.size());
      break;
    case Op::get:
      w.u32(r.timeout_ms);
      w.str(r.key);
      break;
    case Op::wait:
      w.u32(r.timeout_ms);
      w.u32(static_cast<std::uint32_t>(r.keys.size()));
      for (const std::string& k : r.keys) w.str(k);
      break;
    case Op::add:
      w.str(r.key);
      w.i64(r.delta);
      break;
    case Op::auth:
      w.bytes(r.value.data(), r.value.size());
      break;
  }
  return w.finish();
}

Bytes encode_response(Op op, const Response& r) {
  Writer w;
  w.u8(static_cast<std::uint8_t>(r.code));
  if (r.code != StatusCode::ok) {
    w.str(r.message);
  } else if (op == Op::get || op == Op::auth) {
    w.bytes(r.value.data(), r.value.size());
  } else if (op == Op::add) {
    w.i64(r.number);
  }
  return w.finish();
}

Result<std::uint32_t> decode_frame_length(std::span<const std::uint8_t> prefix) {
  if (prefix.size() < kLengthPrefixBytes) return internal_error("decode_frame_length needs 4 bytes");
  std::uint32_t n = 0;
  for (std::size_t i = 0; i < kLengthPrefixBytes; ++i) n |= std::uint32_t{prefix[i]} << (8 * i);
  if (n > kMaxFrameBodyBytes) {
    return bad_frame("frame", "announced body of " + std::to_string(n) + " bytes exceeds the limit of " +
                                  std::to_string(kMaxFrameBodyBytes));
  }
  if (n == 0) return bad_frame("frame", "empty body");
  return n;
}

Result<Request> decode_request(std::span<const std::uint8_t> body) {
  Reader in(body);
  Request r;
  const std::uint8_t op = in.u8("op");
  if (op < static_cast<std::uint8_t>(Op::hello) || op > static_cast<std::uint8_t>(Op::auth)) {
    return bad_frame("request", "unknown op " + std::to_string(op));
  }
  r.op = static_cast<Op>(op);
  switch (r.op) {
    case Op::hello:
      r.magic = in.u32("magic");
      r.version = in.u16("version");
      break;
    case Op::set: {
      r.key = in.key("key");
      auto v = in.blob("value", kMaxValueBytes);
      r.value.assign(v.begin(), v.end());
      break;
    }
    case Op::get:
      r.timeout_ms = in.u32("timeout");
      r.key = in.key("key");
      break;
    case Op::wait: {
      r.timeout_ms = in.u32("timeout");
      const std::uint32_t count = in.u32("key count");
      if (in.ok() && count > kMaxWaitKeys) {
        in.fail("key count " + std::to_string(count) + " exceeds the limit of " + std::to_string(kMaxWaitKeys));
      }
      for (std::uint32_t i = 0; in.ok() && i < count; ++i) r.keys.push_back(in.key("key"));
      break;
    }
    case Op::add:
      r.key = in.key("key");
      r.delta = in.i64("delta");
      break;
    case Op::auth: {
      auto v = in.blob("handshake bytes", kMaxAuthBytes);
      r.value.assign(v.begin(), v.end());
      break;
    }
  }
  in.expect_end();
  if (!in.ok()) return bad_frame(std::string(op_name(r.op)) + " request", in.error());
  return r;
}

Result<Response> decode_response(Op op, std::span<const std::uint8_t> body) {
  Reader in(body);
  Response r;
  const std::uint8_t code = in.u8("status code");
  if (code > static_cast<std::uint8_t>(StatusCode::internal)) {
    return bad_frame("response", "unknown status code " + std::to_string(code));
  }
  r.code = static_cast<StatusCode>(code);
  if (r.code != StatusCode::ok) {
    auto m = in.blob("message", 64 * 1024);
    r.message.assign(m.begin(), m.end());
  } else if (op == Op::auth) {
    auto v = in.blob("handshake bytes", kMaxAuthBytes);
    r.value.assign(v.begin(), v.end());
  } else if (op == Op::get) {
    auto v = in.blob("value", kMaxValueBytes);
    r.value.assign(v.begin(), v.end());
  } else if (op == Op::add) {
    r.number = in.i64("counter");
  }
  in.expect_end();
  if (!in.ok()) return bad_frame(std::string(op_name(op)) + " response", in.error());
  return r;
}

}  // namespace tictac::bootstrap::wire
