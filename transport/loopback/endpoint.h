// LoopbackEndpoint: one side of a loopback Pipe (internal). Loop-thread only (its own side's
// engine), except that the peer's thread reads the Pipe under its mutex.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/backend.h"
#include "transport/loopback/pipe.h"

namespace tictac::transport::loopback {

class LoopbackEndpoint final : public Endpoint {
 public:
  LoopbackEndpoint(std::shared_ptr<Pipe> pipe, int side);
  ~LoopbackEndpoint() override;

  void start(EndpointSink* sink) override;
  bool has_capacity() const override;
  Status post(const wire::Header& header, const std::byte* payload, std::uint64_t cookie) override;
  void close() override;
  std::string describe() const override { return desc_; }

  // Called on this side's loop by tasks the peer posted.
  void deliver(const wire::HeaderBytes& bytes, const std::byte* payload, std::uint64_t cookie);
  void sent(std::uint64_t cookie);
  void broken(const Status& status);

 private:
  void fail(const Status& status);

  std::shared_ptr<Pipe> pipe_;
  const int side_;
  std::string desc_;
  EndpointSink* sink_ = nullptr;
  bool closed_ = false;
  std::uint32_t in_flight_ = 0;
  bool was_full_ = false;
  std::vector<std::function<void()>> early_;  // arrived before start()
};

// Posts `fn(endpoint)` to the loop of `side` of `pipe`, run only if that endpoint still exists
// then. Call with pipe->mutex held.
void post_to_side(const std::shared_ptr<Pipe>& pipe, int side, std::function<void(LoopbackEndpoint&)> fn);

}  // namespace tictac::transport::loopback
