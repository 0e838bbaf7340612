// Store: a small key/value rendezvous used to exchange endpoint addresses before the transport
// connects (rank 0 publishes "addr/0", everybody waits for all "addr/<r>" keys, ...).
//
// Contract:
// - Keys are 1..kMaxKeyBytes arbitrary bytes; values are 0..kMaxValueBytes opaque bytes. A key,
//   once set, can be overwritten by a later set() (last writer wins) but never deleted.
// - Every implementation is thread-safe: any number of threads may share one Store object.
// - get() and wait() block until the keys exist or `timeout` passes; on timeout they return
//   StatusCode::timeout whose message names every missing key. Timeouts are clamped to
//   [0, kMaxTimeout] (negative means "do not wait"; Millis::max() means about 49 days). set() and add() do not wait for
//   other parties; a network-backed store bounds them by its own I/O timeout.
// - add(key, delta) is an atomic fetch-and-add on a signed 64-bit counter stored as the
//   decimal ASCII text of its value (so get() of a counter returns e.g. "3"); a missing key
//   counts as 0. It returns the new value.
// - Errors: invalid_argument (bad key/value, counter overflow, a non-numeric value under add),
//   timeout, connection_lost (a network store whose server is gone), protocol_error (a peer
//   that speaks garbage), unavailable (the backing directory or socket cannot be used).
// The interface is deliberately minimal and byte-oriented so that the torch adapter can put
// c10d::Store behind it.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace tictac::bootstrap {

using Bytes = std::vector<std::uint8_t>;
using Millis = std::chrono::milliseconds;

inline constexpr std::size_t kMaxKeyBytes = 1024;
inline constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxWaitKeys = 4096;
inline constexpr Millis kMaxTimeout{0xFFFFFFFFLL};  // fits the TCP store's u32 milliseconds

class Store {
 public:
  virtual ~Store() = default;

  virtual Status set(std::string_view key, std::span<const std::uint8_t> value) = 0;
  // Blocks until `key` exists, then returns its value.
  virtual Result<Bytes> get(std::string_view key, Millis timeout) = 0;
  // Blocks until every key in `keys` exists.
  virtual Status wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  virtual Result<std::int64_t> add(std::string_view key, std::int64_t delta) = 0;

  // Conveniences over set()/get() for text values.
  Status set_string(std::string_view key, std::string_view text);
  Result<std::string> get_string(std::string_view key, Millis timeout);
};

// Shared validation and message helpers used by every implementation.
Millis clamp_timeout(Millis timeout);
Status validate_key(std::string_view key);
Status validate_value_size(std::size_t size);
Status validate_wait_keys(const std::vector<std::string>& keys);
// timeout Status: "<what>: timed out after <ms> ms waiting for keys: a, b".
Status missing_keys_timeout(std::string_view what, Millis timeout,
                            const std::vector<std::string>& missing);
// A key rendered for messages: printable ASCII as is, other bytes as \xNN, long keys cut.
std::string printable_key(std::string_view key);

// Counter encoding shared by the implementations of add().
Result<std::int64_t> parse_counter(std::string_view key, std::span<const std::uint8_t> value);
Bytes encode_counter(std::int64_t value);
Result<std::int64_t> checked_add(std::string_view key, std::int64_t current, std::int64_t delta);

}  // namespace tictac::bootstrap
