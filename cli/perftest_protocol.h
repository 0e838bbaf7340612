// The perftest's own little protocol on top of the transport: message tags, and control messages
// as short "key=value key=value" texts (the client's setup, the server's reports). Texts are
// limited to kMaxControlBytes and parsed strictly: a peer that sends garbage is a protocol_error
// naming the field, never a crash. Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "transport/types.h"

namespace tictac::cli::perftest {

inline constexpr std::size_t kMaxControlBytes = 4096;
inline constexpr char kProtocol[] = "tictac-perftest/1";

// Tags; every message kind has its own, so matching by (peer, tag) never confuses two kinds.
enum Tag : transport::Tag {
  kTagSetup = 0x7001,   // client -> server: the test and its parameters
  kTagPosted = 0x7002,  // server -> client: receives are posted (priority), clock identity
  kTagAck0 = 0x7003,    // server -> client: the bulk up to --hi-after landed (priority)
  kTagHiAck = 0x7004,   // server -> client: the high-priority message landed (priority)
  kTagReport = 0x7005,  // server -> client: the server's measurements
  kTagBye = 0x7006,     // client -> server: the client has everything; the session is over
  kTagPing = 0x7010,
  kTagPong = 0x7011,
  kTagData = 0x7020,
  kTagBulk = 0x7030,
  kTagHi = 0x7031,
};

// Ordered key/value pairs of a control message.
class Fields {
 public:
  Fields& set(const std::string& key, const std::string& value);
  Fields& set(const std::string& key, std::uint64_t value);
  // "key=value key=value"; keys and values must not contain spaces or '='.
  std::string encode() const;
  // protocol_error naming the problem for anything but well-formed pairs within kMaxControlBytes.
  static Result<Fields> decode(std::string_view text);

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  Result<std::string> text(const std::string& key) const;
  Result<std::uint64_t> number(const std::string& key) const;
  // A comma-separated list of numbers ("1,2,3"), at most `max_items` of them.
  Result<std::vector<std::uint64_t>> numbers(const std::string& key, std::size_t max_items) const;

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::string> values_;
};

std::string join_numbers(const std::vector<std::uint64_t>& values);

// Identity of this machine's CLOCK_MONOTONIC: the kernel boot id. Two processes with the same id
// can subtract each other's steady_clock readings (same kernel; perftest makes no time namespaces).
std::string clock_identity();

// steady_clock (CLOCK_MONOTONIC on Linux) now, in nanoseconds.
std::uint64_t now_ns();

}  // namespace tictac::cli::perftest
