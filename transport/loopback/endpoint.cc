#include "transport/loopback/endpoint.h"

#include <cstring>

namespace tictac::transport::loopback {
namespace {
constexpr std::uint32_t kMaxInFlight = 64;
}  // namespace

void post_to_side(const std::shared_ptr<Pipe>& pipe, int side, std::function<void(LoopbackEndpoint&)> fn) {
  ProgressEngine* engine = pipe->side[side].engine;
  if (engine == nullptr) return;
  engine->post([pipe, side, fn = std::move(fn)] {
    LoopbackEndpoint* ep;
    {
      std::lock_guard<std::mutex> lock(pipe->mutex);
      ep = pipe->side[side].endpoint;
    }
    // Only this (the endpoint's own) loop thread destroys it, so it stays valid here.
    if (ep != nullptr) fn(*ep);
  });
}

LoopbackEndpoint::LoopbackEndpoint(std::shared_ptr<Pipe> pipe, int side) : pipe_(std::move(pipe)), side_(side) {
  std::lock_guard<std::mutex> lock(pipe_->mutex);
  pipe_->side[side_].endpoint = this;
  desc_ = "loopback " + pipe_->side[side_].name + " -> " + pipe_->side[1 - side_].name;
}

LoopbackEndpoint::~LoopbackEndpoint() { close(); }

void LoopbackEndpoint::start(EndpointSink* sink) {
  sink_ = sink;
  auto early = std::move(early_);
  early_.clear();
  for (auto& fn : early) {
    if (closed_) return;
    fn();
  }
}

bool LoopbackEndpoint::has_capacity() const { return !closed_ && in_flight_ < kMaxInFlight; }

Status LoopbackEndpoint::post(const wire::Header& header, const std::byte* payload, std::uint64_t cookie) {
  if (closed_) return Status(StatusCode::connection_lost, "connection closed");
  if (in_flight_ >= kMaxInFlight) {
    was_full_ = true;
    return Status(StatusCode::resource_exhausted, "no capacity: too many loopback frames in flight");
  }
  wire::HeaderBytes bytes = wire::encode(header);
  std::lock_guard<std::mutex> lock(pipe_->mutex);
  if (pipe_->broken) return Status::Ok();  // dropped; the failure is on its way to both sides
  ++pipe_->frames;
  const Faults& f = pipe_->faults;
  if (f.tally) {
    f.tally->by_type[static_cast<std::size_t>(header.type) & 15].fetch_add(1);
    if (header.type == wire::FrameType::announce && (header.flags & wire::kFlagInline) != 0) {
      f.tally->inline_announces.fetch_add(1);
    }
    if ((header.flags & wire::kFlagCredit) != 0) f.tally->credit_piggybacks.fetch_add(1);
  }
  if (f.drop_after_frames != 0 && pipe_->frames > f.drop_after_frames) {
    pipe_->broken = true;
    const Status lost(StatusCode::connection_lost,
                      "loopback fault injection: connection dropped after " +
                          std::to_string(f.drop_after_frames) + " frames");
    for (int s = 0; s < 2; ++s) {
      post_to_side(pipe_, s, [lost](LoopbackEndpoint& ep) { ep.broken(lost); });
    }
    return Status::Ok();
  }
  if (f.corrupt_header_at != 0 && pipe_->frames == f.corrupt_header_at) bytes[0] ^= std::byte{0xff};
  ++in_flight_;
  if (in_flight_ >= kMaxInFlight) was_full_ = true;
  const int peer = 1 - side_;
  const auto delay = f.delay;
  post_to_side(pipe_, peer, [bytes, payload, cookie, delay, pipe = pipe_, peer](LoopbackEndpoint& ep) {
    if (delay.count() == 0) {
      ep.deliver(bytes, payload, cookie);
      return;
    }
    ProgressEngine* engine;
    {
      std::lock_guard<std::mutex> lock(pipe->mutex);
      engine = pipe->side[peer].engine;
    }
    if (engine == nullptr) return;
    engine->add_timer(Clock::now() + delay, [bytes, payload, cookie, pipe, peer] {
      LoopbackEndpoint* target;
      {
        std::lock_guard<std::mutex> lock(pipe->mutex);
        target = pipe->side[peer].endpoint;
      }
      if (target != nullptr) target->deliver(bytes, payload, cookie);
    });
  });
  return Status::Ok();
}

void LoopbackEndpoint::deliver(const wire::HeaderBytes& bytes, const std::byte* payload, std::uint64_t cookie) {
  if (closed_) return;
  if (sink_ == nullptr) {
    early_.push_back([this, bytes, payload, cookie] { deliver(bytes, payload, cookie); });
    return;
  }
  Result<wire::Header> h = wire::decode(bytes);
  if (!h.ok()) {
    fail(h.status());
    return;
  }
  Result<Destination> d = sink_->on_header(*h);
  if (closed_) return;
  if (!d.ok()) {
    fail(d.status());
    return;
  }
  if (h->length > 0 && !d->discard) {
    bool sender_open;
    {
      std::lock_guard<std::mutex> lock(pipe_->mutex);
      sender_open = pipe_->side[1 - side_].open;
      // The sender cannot close (and release the buffer) while we hold the lock.
      if (sender_open) std::memcpy(d->data, payload, h->length);
    }
    if (!sender_open) {
      fail(Status(StatusCode::connection_lost, "the peer closed the connection"));
      return;
    }
  }
  sink_->on_frame(*h);
  if (closed_) return;
  std::lock_guard<std::mutex> lock(pipe_->mutex);
  post_to_side(pipe_, 1 - side_, [cookie](LoopbackEndpoint& ep) { ep.sent(cookie); });
}

void LoopbackEndpoint::sent(std::uint64_t cookie) {
  if (closed_) return;
  --in_flight_;
  sink_->on_sent(cookie);
  if (!closed_ && was_full_ && in_flight_ < kMaxInFlight) {
    was_full_ = false;
    sink_->on_writable();
  }
}

void LoopbackEndpoint::broken(const Status& status) { fail(status); }

void LoopbackEndpoint::fail(const Status& status) {
  if (closed_) return;
  close();
  if (sink_ != nullptr) sink_->on_failed(status);
}

void LoopbackEndpoint::close() {
  if (closed_) return;
  closed_ = true;
  early_.clear();
  std::lock_guard<std::mutex> lock(pipe_->mutex);
  Pipe::Side& me = pipe_->side[side_];
  me.open = false;
  me.endpoint = nullptr;
  me.engine = nullptr;
  const int peer = 1 - side_;
  if (pipe_->side[peer].open) {
    post_to_side(pipe_, peer, [](LoopbackEndpoint& ep) {
      ep.broken(Status(StatusCode::connection_lost, "the peer closed the connection"));
    });
  }
}

}  // namespace tictac::transport::loopback
