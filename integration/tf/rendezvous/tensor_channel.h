// TensorChannel: moves one TF task's tensors to another over the TicTac transport. TF-free: a
// tensor is a header (dtype, shape, status) plus one contiguous payload; the TF side
// (tictac_rendezvous.cc) encodes and decodes it.
//
// Protocol, per fetch (consumer -> producer, one TicTac connection per producer address):
//   consumer: posts the receive of the reply header (tag 4*id+2) and, when it has seen this key
//             before, the receive of the payload (tag 4*id+3) into a tensor of the size the key
//             had last time; then sends the request {id, step, priority, expect, key} on tag
//             kRequestTag at `priority` (expect = the pre-posted payload size, or -1: none).
//   producer: `serve` is called for the request; it calls `reply` exactly once (when the tensor
//             is ready), which sends the header and the payload at the request's priority, so
//             the producer's send queue puts everything it owes in priority order (the paper's
//             enforcement at the sender). A payload of exactly `expect` bytes goes on 4*id+3 and
//             claims the pre-posted receive (the transport advertised it), so it is queued at
//             its priority at once: no READY round trip, which would let a lower-priority
//             payload whose READY came back first take the link (issue 16). Otherwise the
//             header says so (`alt`), an empty message releases a pre-posted receive, and the
//             payload goes on 4*id+1 (or on 4*id+3 when nothing was pre-posted) once the
//             consumer, having read the header, posted its receive.
// Threads: `serve`, `alloc` and `done` run on the transport's loop thread and must not block
// (the TF side hands the work to its own thread pool); fetch/reply/cancel may be called from
// any thread. fetch may block in its first call per address (connect, within TICTAC_TIMEOUT).
// Errors reach `done` as {code, message}; codes are absl/TF canonical codes (14 = UNAVAILABLE
// for a dead or unreachable producer, 1 = CANCELLED), messages name the producer's label.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tictac::tfrdv {

// TF canonical codes used here (same numbers as absl::StatusCode).
inline constexpr int kCodeOk = 0;
inline constexpr int kCodeCancelled = 1;
inline constexpr int kCodeInvalidArgument = 3;
inline constexpr int kCodeDeadlineExceeded = 4;
inline constexpr int kCodeInternal = 13;
inline constexpr int kCodeUnavailable = 14;

struct TensorHeader {
  int code = kCodeOk;  // non-zero: the producer failed; `message` says why
  std::string message;
  int dtype = 0;  // tensorflow::DataType
  std::vector<std::int64_t> dims;
  bool is_dead = false;
  std::uint8_t encoding = 0;  // 0 = raw bytes of a memcpy-able dtype, 1 = serialized TensorProto
  std::uint64_t payload_bytes = 0;
  bool alt = false;  // the payload is on tag 4*id+1 (the pre-posted receive got 0 bytes)
};

struct FetchRequest {
  std::uint64_t id = 0;
  std::int64_t step_id = 0;
  std::int64_t priority = 0;
  std::int64_t expect = -1;  // bytes of the consumer's pre-posted payload receive; -1: none
  std::string key;           // the full rendezvous key
};

// Keeps a reply's payload alive until the transport is done with it.
using Keepalive = std::shared_ptr<void>;
using ReplyFn = std::function<void(TensorHeader header, const void* payload, Keepalive keep)>;
using ServeFn = std::function<void(const FetchRequest& request, ReplyFn reply)>;
// Given the header, returns where the payload goes (payload_bytes writable bytes) or null with
// *error set (then the fetch fails with that message, code INTERNAL). It may be called first with
// the header this key had last time (to pre-post the payload receive) and then again with the
// real one when that differs in size; the last call's buffer is the one that holds the payload.
// The header passed to `done` is the real one (its dtype and dims may differ from a predicted
// header of the same size: the TF side then reinterprets the buffer).
using AllocFn = std::function<void*(const TensorHeader& header, std::string* error)>;
using DoneFn =
    std::function<void(int code, const std::string& message, const TensorHeader& header)>;

struct ChannelStats {
  std::int64_t sent_tensors = 0, sent_bytes = 0, out_of_order = 0;
  std::int64_t recv_tensors = 0, recv_bytes = 0;
};
// Sums over every channel this process has had.
ChannelStats process_stats();

class TensorChannel {
 public:
  // Listens on "tcp://host:port" (TICTAC_AUTH_TOKEN and every TICTAC_* tunable apply) and serves
  // requests with `serve`. Returns null with *error set when the transport cannot start.
  static std::unique_ptr<TensorChannel> create(const std::string& listen_address, ServeFn serve,
                                               std::string* error);
  ~TensorChannel();  // closes the transport; pending fetches fail with CANCELLED

  const std::string& address() const;

  // Fetches `key` of `step_id` from the producer at `address` ("tcp://host:port"; `label`
  // names it in errors, e.g. the TF task). Returns an id for cancel(). `done` runs exactly once.
  std::uint64_t fetch(const std::string& address, const std::string& label, std::int64_t step_id,
                      const std::string& key, std::int64_t priority, AllocFn alloc, DoneFn done);
  // Fails the fetch with CANCELLED (`message`) unless it already completed.
  void cancel(std::uint64_t fetch_id, const std::string& message);

  class Impl;

 private:
  explicit TensorChannel(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;  // shared with in-flight callbacks (they hold weak references)
};

}  // namespace tictac::tfrdv
