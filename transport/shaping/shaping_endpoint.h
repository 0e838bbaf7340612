// ShapingEndpoint: an Endpoint wrapper that paces another endpoint's egress to an emulated link
// (EgressLimiter, TICTAC_RATE_LIMIT). Backend-neutral; the tcp backend wraps its endpoints in it
// when the limit is set (the emulated clusters' loopback fallback).
//
// Contract: same as Endpoint (transport/backend.h); loop thread only. Whole frames only: a
// posted frame reserves its bytes on the link; if it may go now it is handed to the inner
// endpoint at once, otherwise the wrapper holds it (at most one frame), reports no capacity and
// arms a timer, and returns to the loop. When the timer fires the frame goes to the inner
// endpoint and on_writable() lets the core pick the next frame, so sends posted meanwhile are
// ordered by the SendQueue before the next write. The wrapper never blocks or spins and never
// splits a frame: each write is a whole frame (header + chunk). Sink calls from the inner
// endpoint are passed through (on_writable only when this wrapper has capacity too).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "transport/backend.h"
#include "transport/shaping/egress_limiter.h"

namespace tictac::transport::shaping {

class ShapingEndpoint final : public Endpoint, private EndpointSink {
 public:
  // `link` outlives the endpoint (the process-wide limiter lives for the process).
  ShapingEndpoint(ProgressEngine& engine, std::unique_ptr<Endpoint> inner, EgressLimiter& link);
  ~ShapingEndpoint() override;

  void start(EndpointSink* sink) override;
  bool has_capacity() const override;
  Status post(const wire::Header& header, const std::byte* payload, std::uint64_t cookie) override;
  bool export_destination(std::uint64_t msg_id, std::byte* data, std::uint64_t length) override {
    return inner_->export_destination(msg_id, data, length);
  }
  void close() override;
  std::string describe() const override { return inner_->describe(); }

  // Wraps `inner` when TICTAC_RATE_LIMIT is set (else returns it as is). A malformed value is
  // an invalid_argument naming the variable (backends check it in attach()).
  static Result<std::unique_ptr<Endpoint>> wrap_if_limited(ProgressEngine& engine,
                                                           std::unique_ptr<Endpoint> inner);

 private:
  struct Held {
    wire::Header header;
    const std::byte* payload;
    std::uint64_t cookie;
  };

  void release();  // the timer: hands the held frame to the inner endpoint

  // EndpointSink of the inner endpoint: passed through to sink_.
  Result<Destination> on_header(const wire::Header& header) override {
    return sink_->on_header(header);
  }
  void on_frame(const wire::Header& header) override { sink_->on_frame(header); }
  void on_sent(std::uint64_t cookie) override { sink_->on_sent(cookie); }
  void on_writable() override;
  void on_failed(const Status& status) override;

  ProgressEngine& engine_;
  std::unique_ptr<Endpoint> inner_;
  EgressLimiter& link_;
  EndpointSink* sink_ = nullptr;
  bool closed_ = false;
  bool was_full_ = false;  // has_capacity() said no (or post was refused): owe an on_writable
  std::optional<Held> held_;
  ProgressEngine::TimerId timer_ = 0;
};

}  // namespace tictac::transport::shaping
