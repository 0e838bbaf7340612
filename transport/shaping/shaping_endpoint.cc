#include "transport/shaping/shaping_endpoint.h"

#include <utility>

namespace tictac::transport::shaping {

ShapingEndpoint::ShapingEndpoint(ProgressEngine& engine, std::unique_ptr<Endpoint> inner,
                                 EgressLimiter& link)
    : engine_(engine), inner_(std::move(inner)), link_(link) {}

ShapingEndpoint::~ShapingEndpoint() { close(); }

Result<std::unique_ptr<Endpoint>> ShapingEndpoint::wrap_if_limited(
    ProgressEngine& engine, std::unique_ptr<Endpoint> inner) {
  Result<EgressLimiter*> link = EgressLimiter::process_wide();
  if (!link.ok()) return link.status();
  if (*link == nullptr) return inner;
  return std::unique_ptr<Endpoint>(
      std::make_unique<ShapingEndpoint>(engine, std::move(inner), **link));
}

void ShapingEndpoint::start(EndpointSink* sink) {
  sink_ = sink;
  inner_->start(this);
}

bool ShapingEndpoint::has_capacity() const { return !closed_ && !held_ && inner_->has_capacity(); }

Status ShapingEndpoint::post(const wire::Header& header, const std::byte* payload,
                             std::uint64_t cookie) {
  if (closed_) return Status(StatusCode::connection_lost, "connection closed");
  if (!has_capacity()) {
    was_full_ = true;
    return Status(StatusCode::resource_exhausted, "no capacity: the shaped link holds a frame");
  }
  const Clock::time_point now = Clock::now();
  const Clock::time_point at = link_.reserve(wire::kHeaderBytes + header.length, now);
  if (at <= now) return inner_->post(header, payload, cookie);
  held_ = Held{header, payload, cookie};
  was_full_ = true;
  timer_ = engine_.add_timer(at, [this] { release(); });
  return Status::Ok();
}

void ShapingEndpoint::release() {
  timer_ = 0;
  if (closed_ || !held_) return;
  const Held h = *held_;
  held_.reset();
  // The inner endpoint had capacity when the frame was taken and nothing else was posted since.
  Status st = inner_->post(h.header, h.payload, h.cookie);
  if (!st.ok()) {
    on_failed(st.code() == StatusCode::resource_exhausted
                  ? Status(StatusCode::internal,
                           "shaped frame refused by " + inner_->describe() + ": " + st.to_string())
                  : st);
    return;
  }
  if (was_full_ && has_capacity()) {
    was_full_ = false;
    sink_->on_writable();  // last: the core may close (destroy) this endpoint inside it
  }
}

void ShapingEndpoint::on_writable() {
  if (!has_capacity()) return;  // release() reports it once the held frame is out
  was_full_ = false;
  sink_->on_writable();
}

void ShapingEndpoint::on_failed(const Status& status) {
  if (closed_) return;
  close();
  sink_->on_failed(status);
}

void ShapingEndpoint::close() {
  if (closed_) return;
  closed_ = true;
  if (timer_ != 0) engine_.cancel_timer(timer_);
  timer_ = 0;
  held_.reset();
  inner_->close();
}

}  // namespace tictac::transport::shaping
