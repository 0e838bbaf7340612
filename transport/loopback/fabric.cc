#include "transport/loopback/fabric.h"

#include "transport/loopback/endpoint.h"

namespace tictac::transport::loopback {

Result<std::string> Fabric::listen(const std::string& name, ProgressEngine& engine,
                                   std::weak_ptr<AcceptFn> on_accept) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string actual = name.empty() ? "auto-" + std::to_string(++counter_) : name;
  auto it = listeners_.find(actual);
  if (it != listeners_.end() && !it->second.on_accept.expired()) {
    return Status(StatusCode::unavailable, "loopback address '" + actual + "' is already in use");
  }
  listeners_[actual] = Listener{&engine, std::move(on_accept)};
  return actual;
}

void Fabric::unlisten(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  listeners_.erase(name);
}

void Fabric::set_faults(const Faults& faults) {
  std::lock_guard<std::mutex> lock(mutex_);
  faults_ = faults;
}

Result<std::unique_ptr<Endpoint>> Fabric::connect(const std::string& name, ProgressEngine& engine) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = listeners_.find(name);
  if (it == listeners_.end() || it->second.on_accept.expired()) {
    return Status(StatusCode::unavailable, "nobody listens on loopback://" + name);
  }
  auto pipe = std::make_shared<Pipe>();
  {
    std::lock_guard<std::mutex> plock(pipe->mutex);
    pipe->faults = faults_;
    pipe->side[0] = Pipe::Side{&engine, nullptr, true, "client-" + std::to_string(++counter_)};
    pipe->side[1] = Pipe::Side{it->second.engine, nullptr, true, name};
  }
  std::weak_ptr<AcceptFn> weak = it->second.on_accept;
  it->second.engine->post([pipe, weak] {
    std::shared_ptr<AcceptFn> accept = weak.lock();
    if (!accept) {
      std::lock_guard<std::mutex> plock(pipe->mutex);
      pipe->side[1] = Pipe::Side{};
      post_to_side(pipe, 0, [](LoopbackEndpoint& ep) {
        ep.broken(Status(StatusCode::connection_lost, "the listener closed before accepting"));
      });
      return;
    }
    (*accept)(std::make_unique<LoopbackEndpoint>(pipe, 1));
  });
  return std::unique_ptr<Endpoint>(std::make_unique<LoopbackEndpoint>(pipe, 0));
}

std::shared_ptr<Fabric> create_fabric() { return std::make_shared<Fabric>(); }

void inject(Fabric& fabric, const Faults& faults) { fabric.set_faults(faults); }

}  // namespace tictac::transport::loopback
