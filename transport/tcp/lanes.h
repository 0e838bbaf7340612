// TCP lanes (internal to the TCP backend): a second connection per peer. The stream of messages
// stays on one of the two (the current lane); a message more urgent than what the current lane
// carries now goes on the other, which becomes the current lane, so that it does not wait behind
// the bytes already in the kernel's queues (docs/transport.md, "TCP lanes").
//
// Lane 1 is opened by the connecting side once the peer's HELLO arrived on the primary connection
// (the handshake is done: the peer is a TicTac endpoint that registered it): a new socket to the
// same address whose first bytes are a LANE HELLO naming the primary socket's local port. The
// listener reads the first bytes of every accepted socket: a LANE HELLO is paired through the
// LaneRegistry with the accepted endpoint whose peer is that address and port, which answers LANE
// OK on the new socket; anything else is a primary connection for the core. Any failure on the way
// (an older peer, a refused connect, a timeout) leaves the endpoint on its one socket: lanes are an
// optimisation.
//
// Order across the two sockets: only DATA frames may be overtaken. Every frame on lane 1 is
// preceded by an 8-byte barrier, the number of non-DATA frames the sender had posted on lane 0
// before it; the receiver delivers it only once it has delivered that many from lane 0. A frame
// posted on lane 0 after non-DATA frames on lane 1 is preceded by a LANE SYNC frame carrying
// their number, and the receiver delivers nothing behind it on lane 0 before it has delivered as
// many from lane 1. The chunks of one message stay on one lane.
//
// Lane frames are 56 bytes, the size of a wire header, with their own magic ("TTLN"), so an
// older peer rejects them as a foreign frame:
//   off size  field
//     0   4   magic  kLaneMagic
//     4   1   version (1)
//     5   1   kind   LaneFrame::Kind
//     6   2   zero
//     8   8   value  HELLO: the primary socket's local port; OK: 0; SYNC: lane-1 frame count
//    16  40   zero
// Lanes are opt-in (TICTAC_TCP_LANES=1) and never used where a job token is set (the lane socket
// is not authenticated).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "transport/wire.h"

namespace tictac::transport::tcp {

class TcpEndpoint;

inline constexpr std::uint32_t kLaneMagic = 0x4e4c5454;  // bytes "TTLN"
inline constexpr std::size_t kLaneBarrierBytes = 8;

struct LaneFrame {
  enum class Kind : std::uint8_t { hello = 1, ok = 2, sync = 3 };
  Kind kind = Kind::sync;
  std::uint64_t value = 0;
};

wire::HeaderBytes encode_lane_frame(const LaneFrame& frame);
// Whether `bytes` (at least 4) start with the lane magic.
bool is_lane_frame(std::span<const std::byte> bytes);
// protocol_error naming the defect for a malformed lane frame.
Result<LaneFrame> decode_lane_frame(std::span<const std::byte> bytes);

// TICTAC_TCP_LANES: 0 (the default) or 1. invalid_argument naming the variable otherwise.
Result<bool> lanes_from_env();
// TICTAC_TCP_LANE_SWITCH (bytes, default 256 KiB): a message more urgent than the stream on the
// current lane takes the other lane only when the current one carries at least this many DATA
// bytes posted after its last non-DATA frame. A frame on the other lane waits (its barrier) for
// every non-DATA frame posted before it, so those bytes are all a switch can skip. 0 = switch
// whenever a message is more urgent. invalid_argument naming the variable for a bad value.
Result<std::uint64_t> lane_switch_bytes_from_env();

// Accepted endpoints waiting for their lane, by the peer's "ip:port" (loop thread only).
class LaneRegistry {
 public:
  void add(const std::string& peer, TcpEndpoint* endpoint) { by_peer_[peer] = endpoint; }
  void remove(const std::string& peer, const TcpEndpoint* endpoint);
  // Hands the lane socket `fd` from `peer` to its endpoint; false (fd untouched) when none waits.
  bool attach(const std::string& peer, int fd);

 private:
  std::unordered_map<std::string, TcpEndpoint*> by_peer_;
};

}  // namespace tictac::transport::tcp
