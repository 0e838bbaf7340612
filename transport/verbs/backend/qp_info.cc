#include "transport/verbs/backend/qp_info.h"

#include <cstring>
#include <string>

#include "transport/verbs/backend/config.h"

namespace tictac::verbs {
namespace {

template <typename T>
void put(std::byte* p, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
}

template <typename T>
T get(const std::byte* p) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

Status bad(const std::string& what) {
  return Status(StatusCode::protocol_error, "bad verbs connection info from the peer: " + what);
}

}  // namespace

std::array<std::byte, kQpInfoBytes> encode(const QpInfo& info) {
  std::array<std::byte, kQpInfoBytes> b{};
  std::byte* p = b.data();
  put<std::uint32_t>(p + 0, kQpInfoMagic);
  put<std::uint16_t>(p + 4, kQpInfoVersion);
  put<std::uint8_t>(p + 6, info.link_layer);
  put<std::uint8_t>(p + 7, static_cast<std::uint8_t>(info.mtu));
  put<std::uint16_t>(p + 8, info.lid);
  put<std::uint32_t>(p + 12, info.data_qpn);
  put<std::uint32_t>(p + 16, info.ctrl_qpn);
  std::memcpy(p + 20, info.gid.raw, 16);
  put<std::uint64_t>(p + 36, info.ring_addr);
  put<std::uint32_t>(p + 44, info.ring_rkey);
  put<std::uint32_t>(p + 48, info.ring_slots);
  put<std::uint32_t>(p + 52, info.slot_bytes);
  put<std::uint32_t>(p + 56, info.ctrl_recvs);
  put<std::uint32_t>(p + 60, info.psn);
  return b;
}

Result<QpInfo> decode_qp_info(std::span<const std::byte> bytes) {
  if (bytes.size() < kQpInfoBytes) {
    return bad("truncated (" + std::to_string(bytes.size()) + " of " + std::to_string(kQpInfoBytes) + " bytes)");
  }
  const std::byte* p = bytes.data();
  if (get<std::uint32_t>(p) != kQpInfoMagic) {
    return bad("bad magic (is the peer a TicTac verbs endpoint? a TCP address given as verbs://?)");
  }
  if (const auto v = get<std::uint16_t>(p + 4); v == 1) {
    return bad("version 1, expected " + std::to_string(kQpInfoVersion) +
               ": the peer runs an older TicTac whose verbs backend has no zero-copy RDMA WRITE and "
               "reads the receive ring differently; run the same TicTac release on both sides");
  } else if (v != kQpInfoVersion) {
    return bad("version " + std::to_string(v) + ", expected " + std::to_string(kQpInfoVersion) +
               " (mixed TicTac versions)");
  }
  QpInfo info;
  info.link_layer = get<std::uint8_t>(p + 6);
  const auto mtu = get<std::uint8_t>(p + 7);
  if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096) return bad("MTU code " + std::to_string(mtu) + " is not 1..5");
  info.mtu = static_cast<ibv_mtu>(mtu);
  info.lid = get<std::uint16_t>(p + 8);
  info.data_qpn = get<std::uint32_t>(p + 12);
  info.ctrl_qpn = get<std::uint32_t>(p + 16);
  if (info.data_qpn == 0 || info.ctrl_qpn == 0 || info.data_qpn > 0xffffff || info.ctrl_qpn > 0xffffff ||
      info.data_qpn == info.ctrl_qpn) {
    return bad("QP numbers " + std::to_string(info.data_qpn) + "/" + std::to_string(info.ctrl_qpn) +
               " are not two distinct 24-bit numbers");
  }
  std::memcpy(info.gid.raw, p + 20, 16);
  info.ring_addr = get<std::uint64_t>(p + 36);
  info.ring_rkey = get<std::uint32_t>(p + 44);
  info.ring_slots = get<std::uint32_t>(p + 48);
  info.slot_bytes = get<std::uint32_t>(p + 52);
  info.ctrl_recvs = get<std::uint32_t>(p + 56);
  info.psn = get<std::uint32_t>(p + 60);
  if (info.psn > 0xffffff) return bad("initial PSN " + std::to_string(info.psn) + " is wider than 24 bits");
  if (info.ring_slots < 1 || info.ring_slots > kMaxRingSlots) {
    return bad("ring of " + std::to_string(info.ring_slots) + " slots (1.." + std::to_string(kMaxRingSlots) + ")");
  }
  if (info.slot_bytes < kMinSlotBytes || info.slot_bytes > kMaxSlotBytes) {
    return bad("slot of " + std::to_string(info.slot_bytes) + " bytes (" + std::to_string(kMinSlotBytes) +
               ".." + std::to_string(kMaxSlotBytes) + ")");
  }
  if (info.ctrl_recvs < 1 || info.ctrl_recvs > kMaxRingSlots) {
    return bad(std::to_string(info.ctrl_recvs) + " control receives (1.." + std::to_string(kMaxRingSlots) + ")");
  }
  return info;
}

Status check_peer_limits(const QpInfo& peer, const VerbsConfig& config) {
  const auto refuse = [](const std::string& what, std::uint32_t value, std::uint32_t limit, const char* var) {
    return Status(StatusCode::resource_exhausted,
                  "the verbs peer announced " + what + " " + std::to_string(value) + ", over this side's limit of " +
                      std::to_string(limit) + " (" + var + "); refused before registering anything for it. "
                      "Raise " + var + " here or lower the peer's setting");
  };
  if (peer.slot_bytes > config.peer_slot_bytes_limit()) {
    return refuse("slot bytes:", peer.slot_bytes, config.peer_slot_bytes_limit(), "TICTAC_VERBS_MAX_PEER_SLOT_BYTES");
  }
  if (peer.ring_slots > config.peer_ring_slots_limit()) {
    return refuse("ring slots:", peer.ring_slots, config.peer_ring_slots_limit(),
                  "TICTAC_VERBS_MAX_PEER_RING_SLOTS");
  }
  if (peer.ctrl_recvs > config.peer_ring_slots_limit()) {
    return refuse("control receives:", peer.ctrl_recvs, config.peer_ring_slots_limit(),
                  "TICTAC_VERBS_MAX_PEER_RING_SLOTS");
  }
  return Status::Ok();
}

}  // namespace tictac::verbs
