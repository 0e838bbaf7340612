// Small value types shared by the whole transport: peer and request handles, tags, priorities
// and the completion callback signature. Plain values; thread-safe to copy.
#pragma once

#include <cstdint>
#include <functional>

#include "common/status.h"

namespace tictac::transport {

// A connected peer, as numbered by one Context (never reused within that Context).
using PeerId = std::uint64_t;
// recv() from any peer.
inline constexpr PeerId kAnyPeer = ~PeerId{0};
// Not a peer (e.g. the source of a request that failed before it matched).
inline constexpr PeerId kNoPeer = 0;

// User tag: messages match receives by (source, tag), first in first out for equal keys.
using Tag = std::uint64_t;

// Smaller value = sent first (same direction as priority::Schedule).
using Priority = std::int64_t;

// Handle for cancel(); 0 is never a valid request.
using RequestId = std::uint64_t;
inline constexpr RequestId kNoRequest = 0;

// Completion: fires exactly once per request, on the Context's loop thread, never inside the
// call that submitted the request. `bytes` is the number of payload bytes moved (for a receive:
// the message length); `source` the peer the message came from (the target peer for a send).
using Callback = std::function<void(const Status& status, std::uint64_t bytes, PeerId source)>;

}  // namespace tictac::transport
