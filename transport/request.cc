#include "transport/request.h"

#include <utility>

#include "common/check.h"
#include "transport/message_trace.h"

namespace tictac::transport {

std::string_view to_string(RequestState state) {
  switch (state) {
    case RequestState::queued: return "queued";
    case RequestState::waiting_for_stream: return "waiting_for_stream";
    case RequestState::posted: return "posted";
    case RequestState::completed: return "completed";
  }
  return "unknown";
}

Request::Request(RequestId id, RequestKind kind, PeerId peer, Tag tag, std::byte* data,
                 std::uint64_t length, Priority priority, Callback callback)
    : id_(id), kind_(kind), peer_(peer), tag_(tag), data_(data), length_(length),
      priority_(priority), callback_(std::move(callback)) {}

void Request::set_state(RequestState next) {
  const bool legal =
      (state_ == RequestState::queued &&
       (next == RequestState::waiting_for_stream || next == RequestState::posted)) ||
      (state_ == RequestState::waiting_for_stream && next == RequestState::posted) ||
      (state_ == next && next != RequestState::completed);
  TICTAC_CHECK(legal, "request " << id_ << ": illegal transition " << to_string(state_) << " -> "
                                 << to_string(next));
  if (next == RequestState::posted && trace_submit_ns_ != 0 && trace_posted_ns_ == 0) {
    trace_posted_ns_ = trace_clock_ns();
  }
  state_ = next;
}

void Request::stamp_cleared_now() { trace_cleared_ns_ = trace_clock_ns(); }

void Request::complete(const Status& status, std::uint64_t bytes, PeerId source) {
  TICTAC_CHECK(state_ != RequestState::completed, "request " << id_ << " completed twice");
  state_ = RequestState::completed;
  Callback cb = std::move(callback_);
  callback_ = nullptr;
  if (cb) cb(status, bytes, source);
}

}  // namespace tictac::transport
