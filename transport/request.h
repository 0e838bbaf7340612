// Request: one send or receive, as an explicit state machine.
//
//   send:  queued ----------------> posted --------> completed
//          (announced; waiting for   (first chunk     (all chunks left the host, or an error,
//           READY or for the window)  handed over)     or cancelled)
//   recv:  queued ----------------> posted --------> completed
//          (waiting for a match)     (bound to one    (all bytes landed, or an error, or
//                                     message)         cancelled)
//   waiting_for_stream sits between queued and posted for CUDA buffers whose producer stream has
//   not reached the transfer yet (used by the cuda layer).
// Any state may go to completed; completed is terminal, and complete() fires the callback exactly
// once. Loop-thread only; the Context owns every Request until it completes. A host request on
// its way from Context::submit to the loop is itself the posted item (PostedWork): no task and no
// holder are allocated for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "transport/progress_engine.h"
#include "transport/types.h"

namespace tictac::transport {

enum class RequestState : std::uint8_t { queued, waiting_for_stream, posted, completed };
enum class RequestKind : std::uint8_t { send, recv };

std::string_view to_string(RequestState state);

class Core;

class Request final : public PostedWork {
 public:
  Request(RequestId id, RequestKind kind, PeerId peer, Tag tag, std::byte* data,
          std::uint64_t length, Priority priority, Callback callback);
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  RequestId id() const { return id_; }
  RequestKind kind() const { return kind_; }
  RequestState state() const { return state_; }
  PeerId peer() const { return peer_; }  // kAnyPeer for an any-source receive
  Tag tag() const { return tag_; }
  std::byte* data() const { return data_; }
  std::uint64_t length() const { return length_; }
  Priority priority() const { return priority_; }
  bool done() const { return state_ == RequestState::completed; }

  // Trace stamps (transport/message_trace.h), CLOCK_MONOTONIC ns, 0 = not traced: when it was
  // submitted (set by the Context on the caller's thread, before the loop sees it) and when it
  // first entered `posted` (set by set_state, only when submitted is stamped).
  void stamp_trace_submit(std::int64_t ns) { trace_submit_ns_ = ns; }
  // A send's data entered its priority lane (eager, claimed, or the receiver's READY came): from
  // here on only the scheduler and the window hold it back. Stamped once, when traced.
  void stamp_trace_cleared() {
    if (trace_submit_ns_ != 0 && trace_cleared_ns_ == 0) stamp_cleared_now();
  }
  std::int64_t trace_submit_ns() const { return trace_submit_ns_; }
  std::int64_t trace_posted_ns() const { return trace_posted_ns_; }
  std::int64_t trace_cleared_ns() const { return trace_cleared_ns_; }

  // queued -> waiting_for_stream -> posted; checked transitions.
  void set_state(RequestState next);
  // Fires the callback (once; a second call is a broken invariant) and enters completed.
  void complete(const Status& status, std::uint64_t bytes, PeerId source);

  // Context::submit's hand-off: once posted (ProgressEngine::post(this)), the loop gives the
  // request to core->send() or core->recv() (defined in context.cc). Never run: deleted unheard,
  // as a dropped task's request always was.
  void submit_to(Core* core) { submit_to_ = core; }
  void run_posted() override;
  void drop_posted() override { delete this; }

 private:
  RequestId id_;
  RequestKind kind_;
  RequestState state_ = RequestState::queued;
  PeerId peer_;
  Tag tag_;
  std::byte* data_;
  std::uint64_t length_;
  Priority priority_;
  Callback callback_;
  Core* submit_to_ = nullptr;
  std::int64_t trace_submit_ns_ = 0;
  std::int64_t trace_posted_ns_ = 0;
  std::int64_t trace_cleared_ns_ = 0;
  void stamp_cleared_now();  // out of line: the clock is read only when traced
};

}  // namespace tictac::transport
