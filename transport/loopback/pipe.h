// Pipe: the shared state of one loopback connection between two endpoints (internal).
// Thread safety: `mutex` guards every field; an endpoint pointer is dereferenced only on its own
// side's loop thread (which is the only thread that clears it, in close()). post() to a
// ProgressEngine is called with the pipe locked; the engine's inbox takes no lock.
#pragma once

#include <cstdint>
#include <mutex>

#include "transport/loopback/factory.h"
#include "transport/progress_engine.h"

namespace tictac::transport::loopback {

class LoopbackEndpoint;

struct Pipe {
  struct Side {
    ProgressEngine* engine = nullptr;
    LoopbackEndpoint* endpoint = nullptr;
    bool open = false;
    std::string name;  // for describe()
  };
  std::mutex mutex;
  Side side[2];
  Faults faults;
  std::uint64_t frames = 0;  // posted so far, both directions
  bool broken = false;
};

}  // namespace tictac::transport::loopback
