// Fabric: the loopback backend's listener table (internal; users see it opaquely through
// factory.h). Thread-safe: `mutex_` guards the table, the fault plan and the name counter.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "transport/backend.h"
#include "transport/loopback/factory.h"
#include "transport/loopback/pipe.h"

namespace tictac::transport::loopback {

class Fabric {
 public:
  // Registers `name` (empty = a unique one); the listener lives as long as `on_accept` does.
  Result<std::string> listen(const std::string& name, ProgressEngine& engine, std::weak_ptr<AcceptFn> on_accept);
  void unlisten(const std::string& name);
  // Creates the pipe and schedules the accept on the listener's loop; unavailable when nobody
  // listens on `name`.
  Result<std::unique_ptr<Endpoint>> connect(const std::string& name, ProgressEngine& engine);
  void set_faults(const Faults& faults);

 private:
  struct Listener {
    ProgressEngine* engine;
    std::weak_ptr<AcceptFn> on_accept;
  };
  std::mutex mutex_;
  std::map<std::string, Listener> listeners_;
  Faults faults_;
  std::uint64_t counter_ = 0;
};

}  // namespace tictac::transport::loopback
