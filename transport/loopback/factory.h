// The loopback backend's front door: an in-process "network" (a Fabric) that connects Contexts in
// one process, with fault injection for tests. Frames are encoded and decoded exactly as on TCP;
// payloads are copied once, from the sender's buffer straight into the receiver's destination.
// Addresses: "loopback://<name>" (listen on an empty name to get a unique one).
//
// Thread safety: a Fabric is shared by any number of Contexts on any threads (a mutex guards its
// listener table); each backend from create() belongs to one Context (see backend.h).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "transport/backend.h"

namespace tictac::transport::loopback {

// Counts the frames posted on connections created after inject(), by frame type (tests count
// frames per message with it). Thread-safe.
struct FrameTally {
  std::array<std::atomic<std::uint64_t>, 16> by_type{};
  std::atomic<std::uint64_t> inline_announces{0};  // ANNOUNCEs that carried their data
  std::atomic<std::uint64_t> credit_piggybacks{0};  // frames that returned credit (kFlagCredit)
  std::uint64_t of(wire::FrameType t) const { return by_type[static_cast<std::size_t>(t)].load(); }
};

// Faults applied to connections created after inject(). Frame counts are per connection, both
// directions together, 1-based; 0 disables a fault.
struct Faults {
  std::chrono::microseconds delay{0};   // every frame arrives this much later (order is kept)
  std::uint64_t drop_after_frames = 0;  // the connection breaks when frame N+1 is posted
  std::uint64_t corrupt_header_at = 0;  // frame N arrives with a bad magic number
  std::shared_ptr<FrameTally> tally;     // not a fault: counts the frames (null = none)
};

class Fabric;

std::shared_ptr<Fabric> create_fabric();
void inject(Fabric& fabric, const Faults& faults);
std::unique_ptr<Backend> create(std::shared_ptr<Fabric> fabric);

}  // namespace tictac::transport::loopback
