#include "transport/tcp/lanes.h"

#include <string>

#include "common/tunables.h"
#include "transport/tcp/endpoint.h"

namespace tictac::transport::tcp {
namespace {

using wire::get_le;
using wire::put_le;

constexpr std::uint8_t kLaneVersion = 1;

// Off by default: they cut point-to-point pre-emption latency, but gained nothing in emulated PS
// training on the 2-core VM (docs/benchmarks.md, "TCP lanes in PS training").
const BoolTunable kLanes{"TICTAC_TCP_LANES", false,
                         "1 = a second TCP connection per peer, so that a message more urgent "
                         "than the stream on one socket skips the bytes queued in the kernel for "
                         "it (never where a job token is set); 0 = one connection per peer"};

const SizeTunable kLaneSwitch{
    "TICTAC_TCP_LANE_SWITCH", 256 << 10,
    "with TICTAC_TCP_LANES=1: a more urgent message switches lanes only when the current lane "
    "carries at least this many data bytes posted after its last control frame (all a switch "
    "can skip); 0 = always"};

}  // namespace

Result<std::uint64_t> lane_switch_bytes_from_env() { return kLaneSwitch.get(); }

wire::HeaderBytes encode_lane_frame(const LaneFrame& frame) {
  wire::HeaderBytes out{};
  put_le(out.data(), kLaneMagic, 4);
  put_le(out.data() + 4, kLaneVersion, 1);
  put_le(out.data() + 5, static_cast<std::uint8_t>(frame.kind), 1);
  put_le(out.data() + 8, frame.value, 8);
  return out;
}

bool is_lane_frame(std::span<const std::byte> bytes) {
  return bytes.size() >= 4 && get_le(bytes.data(), 4) == kLaneMagic;
}

Result<LaneFrame> decode_lane_frame(std::span<const std::byte> bytes) {
  auto bad = [](const std::string& what) {
    return Status(StatusCode::protocol_error, "malformed tcp lane frame: " + what);
  };
  if (bytes.size() < wire::kHeaderBytes) return bad("truncated");
  if (!is_lane_frame(bytes)) return bad("bad magic");
  const std::byte* p = bytes.data();
  if (get_le(p + 4, 1) != kLaneVersion) {
    return bad("version " + std::to_string(get_le(p + 4, 1)) + " (this build speaks " +
               std::to_string(kLaneVersion) + ")");
  }
  const std::uint64_t kind = get_le(p + 5, 1);
  if (kind < 1 || kind > 3) return bad("unknown kind " + std::to_string(kind));
  if (get_le(p + 6, 2) != 0) return bad("reserved bytes set");
  for (std::size_t i = 16; i < wire::kHeaderBytes; ++i) {
    if (p[i] != std::byte{0}) return bad("reserved bytes set");
  }
  LaneFrame f;
  f.kind = static_cast<LaneFrame::Kind>(kind);
  f.value = get_le(p + 8, 8);
  if (f.kind == LaneFrame::Kind::hello && (f.value == 0 || f.value > 65535)) {
    return bad("HELLO names port " + std::to_string(f.value));
  }
  return f;
}

Result<bool> lanes_from_env() { return kLanes.get(); }

void LaneRegistry::remove(const std::string& peer, const TcpEndpoint* endpoint) {
  auto it = by_peer_.find(peer);
  if (it != by_peer_.end() && it->second == endpoint) by_peer_.erase(it);
}

bool LaneRegistry::attach(const std::string& peer, int fd) {
  auto it = by_peer_.find(peer);
  if (it == by_peer_.end()) return false;
  TcpEndpoint* ep = it->second;
  by_peer_.erase(it);  // one lane per endpoint
  return ep->attach_lane(fd);
}

}  // namespace tictac::transport::tcp
