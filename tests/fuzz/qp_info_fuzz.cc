// libFuzzer target: arbitrary bytes as the verbs QpInfo a peer sends on the side channel
// (transport/verbs/backend/qp_info.h), then the acceptor's size limits (check_peer_limits).
//
// Properties checked (a violation aborts): nothing crashes or reads out of bounds (ASan/UBSan);
// an accepted QpInfo has its fields in the documented ranges (MTU code, distinct 24-bit QP
// numbers, 24-bit PSN, slot and ring limits) and re-encodes to the input's first kQpInfoBytes
// except the reserved bytes; check_peer_limits with the default configuration accepts exactly
// the infos within TICTAC_VERBS_MAX_PEER_SLOT_BYTES / _RING_SLOTS defaults and names the
// variable when it refuses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "transport/verbs/backend/config.h"
#include "transport/verbs/backend/qp_info.h"

namespace {

using namespace tictac::verbs;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  tictac::Result<QpInfo> info = decode_qp_info(bytes);
  if (!info.ok()) {
    check(info.status().code() == tictac::StatusCode::protocol_error);
    return 0;
  }
  check(size >= kQpInfoBytes);
  check(info->mtu >= IBV_MTU_256 && info->mtu <= IBV_MTU_4096);
  check(info->data_qpn != 0 && info->ctrl_qpn != 0 && info->data_qpn != info->ctrl_qpn);
  check(info->data_qpn <= 0xffffff && info->ctrl_qpn <= 0xffffff && info->psn <= 0xffffff);
  check(info->ring_slots >= 1 && info->ring_slots <= kMaxRingSlots);
  check(info->ctrl_recvs >= 1 && info->ctrl_recvs <= kMaxRingSlots);
  check(info->slot_bytes >= kMinSlotBytes && info->slot_bytes <= kMaxSlotBytes);
  const auto again = encode(*info);
  for (std::size_t i = 0; i < kQpInfoBytes; ++i) {
    if (i == 10 || i == 11) continue;  // reserved: not checked, re-encoded as zero
    check(again[i] == bytes[i]);
  }
  const VerbsConfig config;  // the defaults
  const tictac::Status limits = check_peer_limits(*info, config);
  const bool within = info->slot_bytes <= config.peer_slot_bytes_limit() &&
                      info->ring_slots <= config.peer_ring_slots_limit() &&
                      info->ctrl_recvs <= config.peer_ring_slots_limit();
  check(limits.ok() == within);
  if (!limits.ok()) check(limits.message().find("TICTAC_VERBS_MAX_PEER_") != std::string::npos);
  return 0;
}
