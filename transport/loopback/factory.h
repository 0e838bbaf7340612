// The loopback backend's front door: an in-process "network" (a Fabric) that connects Contexts in
// one process, with fault injection for tests. Frames are encoded and decoded exactly as on TCP;
// payloads are copied once, from the sender's buffer straight into the receiver's destination.
// Addresses: "loopback://<name>" (listen on an empty name to get a unique one).
//
// Thread safety: a Fabric is shared by any number of Contexts on any threads (a mutex guards its
// listener table); each backend from create() belongs to one Context (see backend.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "transport/backend.h"

namespace tictac::transport::loopback {

// Faults applied to connections created after inject(). Frame counts are per connection, both
// directions together, 1-based; 0 disables a fault.
struct Faults {
  std::chrono::microseconds delay{0};   // every frame arrives this much later (order is kept)
  std::uint64_t drop_after_frames = 0;  // the connection breaks when frame N+1 is posted
  std::uint64_t corrupt_header_at = 0;  // frame N arrives with a bad magic number
};

class Fabric;

std::shared_ptr<Fabric> create_fabric();
void inject(Fabric& fabric, const Faults& faults);
std::unique_ptr<Backend> create(std::shared_ptr<Fabric> fabric);

}  // namespace tictac::transport::loopback
