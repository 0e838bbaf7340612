// Wire format of the TCP store: pure encode/decode functions, no sockets (unit-tested and
// fuzzable on their own).
//
// Every message is a frame: u32 body length (little-endian, at most kMaxFrameBodyBytes) then the
// body. Strings and byte values inside a body are u32 length + bytes. All integers little-endian.
//   request body:  u8 op, then
//     hello: u32 magic 'TTST' (0x54535454), u16 version     (must be a connection's first frame)
//     set:   key, value
//     get:   u32 timeout_ms, key
//     wait:  u32 timeout_ms, u32 count (<= kMaxWaitKeys), count x key
//     add:   key, i64 delta
//     auth:  bytes (<= kMaxAuthBytes): transport/auth handshake messages
//   response body: u8 status code (tictac::StatusCode), then
//     ok:     get -> value; add -> i64 new value; auth -> bytes (the server's handshake
//             output); hello/set/wait -> nothing
//     not ok: message string (the server's Status message)
// Version 2: after hello, the client runs transport/auth's handshake (TICTAC_AUTH_TOKEN, the
// transport's HMAC exchange) as the initiator in auth frames, one request/response per step,
// before any other op; the server refuses everything else until it passed.
// Decoding validates everything: known op, key and value limits of store.h, no bytes left
// over. Any violation is a protocol_error whose message names the problem. Thread-safe (pure).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "transport/bootstrap/store.h"

namespace tictac::bootstrap::wire {

inline constexpr std::uint32_t kMagic = 0x54535454;  // "TTST" in little-endian byte order
inline constexpr std::uint16_t kVersion = 2;  // 2: the auth step after hello
inline constexpr std::size_t kLengthPrefixBytes = 4;
// Largest body: a set of a maximal value plus its key and framing.
inline constexpr std::size_t kMaxFrameBodyBytes = kMaxValueBytes + kMaxKeyBytes + 64;
// Handshake bytes in one auth frame (a handshake step sends at most two messages of
// auth::kMaxMessageBytes), and the largest frame the server reads before a client authenticated.
inline constexpr std::size_t kMaxAuthBytes = 2048;
inline constexpr std::size_t kMaxPreAuthFrameBodyBytes = kMaxAuthBytes + 16;

enum class Op : std::uint8_t { hello = 1, set = 2, get = 3, wait = 4, add = 5, auth = 6 };

struct Request {
  Op op = Op::hello;
  std::uint32_t magic = kMagic;      // hello
  std::uint16_t version = kVersion;  // hello
  std::uint32_t timeout_ms = 0;      // get, wait
  std::string key;                   // set, get, add
  Bytes value;                       // set; auth: handshake bytes
  std::vector<std::string> keys;     // wait
  std::int64_t delta = 0;            // add
};

struct Response {
  StatusCode code = StatusCode::ok;
  std::string message;  // when code != ok
  Bytes value;          // ok get; ok auth: handshake bytes
  std::int64_t number = 0;  // ok add
};

// Whole frames (length prefix included).
Bytes encode_request(const Request& request);
Bytes encode_response(Op op, const Response& response);

// Reads the length prefix of a frame (needs kLengthPrefixBytes bytes); protocol_error when the
// announced body exceeds kMaxFrameBodyBytes.
Result<std::uint32_t> decode_frame_length(std::span<const std::uint8_t> prefix);
// Bodies (without the length prefix).
Result<Request> decode_request(std::span<const std::uint8_t> body);
Result<Response> decode_response(Op op, std::span<const std::uint8_t> body);

const char* op_name(Op op);

}  // namespace tictac::bootstrap::wire
