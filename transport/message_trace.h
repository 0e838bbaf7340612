// MessageTrace: an opt-in timeline of one Context's traffic, to see where a message waited and
// in which order data left and landed (TICTAC_TRACE=path, or ContextOptions::trace_path).
//
// Recorded on the loop thread, streamed to the file as Chrome trace-event JSON (the array form,
// one event per line; open it in https://ui.perfetto.dev or chrome://tracing):
//   - every request (send or receive): from its submission (clock read on the caller's thread)
//     to its completion, with bytes, priority, status and how long it waited before its first
//     chunk left (sends) or before it was bound to a message (receives);
//   - every data chunk a send handed to the backend: from the hand-off to the backend's "sent"
//     (on tcp: written into the socket), with message id, offset, bytes and priority;
//   - every data frame that landed (receiver): an instant with message id, offset and bytes.
// Lanes ("threads" in the viewer) are per peer and kind: "send -> peer N", "wire -> peer N",
// "recv <- peer N", "landed <- peer N". Timestamps are CLOCK_MONOTONIC microseconds, so traces of
// processes on one host line up.
//
// The path may contain %p (the process id) and %c (this Context's number in the process, from
// 0); a path this process has already opened gets ".1", ".2", ... appended. At most `max_events`
// events are written (TICTAC_TRACE_MAX_EVENTS, default 1,000,000); the rest are counted and the
// count is written as a final metadata event. The closing bracket is written when the Context
// is destroyed; a file cut short (a killed process) still loads, since the array form does not
// need it. Cost when off: one pointer test per chunk and per completion.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

#include "common/status.h"
#include "transport/config.h"
#include "transport/types.h"
#include "transport/wire.h"

namespace tictac::transport {

class Request;

// CLOCK_MONOTONIC now, in nanoseconds (the trace's clock; never 0).
std::int64_t trace_clock_ns();

class MessageTrace {
 public:
  // `path` unset: TICTAC_TRACE (empty or unset = off: nullptr). A file that cannot be created is
  // an error naming the variable and the path. `context_name` labels the process in the viewer;
  // `config`'s priority, chunk and window settings go into a "tictac_config" metadata event.
  static Result<std::unique_ptr<MessageTrace>> open(const std::optional<std::string>& path,
                                                    const std::string& context_name,
                                                    const TransportConfig& config);
  ~MessageTrace();
  MessageTrace(const MessageTrace&) = delete;
  MessageTrace& operator=(const MessageTrace&) = delete;

  const std::string& path() const { return path_; }

  // A request reached its end (called before its callback runs). `source`: the peer it was
  // sent to or received from (kNoPeer when none).
  void request(const Request& req, const Status& status, std::uint64_t bytes, PeerId source);
  // A data chunk of message `msg_id` to `peer` went from hand-off (`posted_ns`) to sent (now).
  void chunk(PeerId peer, Tag tag, Priority priority, std::uint64_t msg_id, std::uint64_t offset,
             std::uint64_t bytes, std::int64_t posted_ns);
  // A data frame (DATA, or an ANNOUNCE carrying its data) from `peer` landed now.
  void landed(PeerId peer, const wire::Header& h);

  std::uint64_t written() const { return written_; }
  std::uint64_t dropped() const { return dropped_; }

 private:
  MessageTrace(std::FILE* file, std::string path, std::uint64_t max_events);
  // Starts one event line, unless the limit is reached (then counts it and returns false).
  bool begin_event();
  // The lane of `kind` (1 send, 2 wire, 3 recv, 4 landed) for `peer`, named on first use.
  long lane(PeerId peer, int kind);

  std::FILE* file_;
  std::string path_;
  std::uint64_t max_events_;
  std::uint64_t written_ = 0;
  std::uint64_t dropped_ = 0;
  long pid_;
  std::unordered_set<long> named_lanes_;
};

}  // namespace tictac::transport
