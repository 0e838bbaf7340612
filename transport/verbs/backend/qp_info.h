// QpInfo: what two verbs endpoints exchange over the TCP side channel before their queue pairs
// can connect (the job rdma_cm does on real deployments): QP numbers, port address (LID and/or
// GID), MTU, and the receive ring that the peer writes into (address, rkey, shape).
//
// Wire form: kQpInfoBytes, little-endian, versioned. Version 2 (zero-copy RDMA WRITE) keeps
// version 1's layout but changes what travels in the ring (the slot kind byte, READY carrying a
// destination export: see endpoint.h), so a version-1 peer is refused with a message that says
// so; there is no fallback, since a v1 peer would misread v2 slots.
//
//   off size field
//     0   4  magic        "TVQP"
//     4   2  version      kQpInfoVersion
//     6   1  link_layer   IBV_LINK_LAYER_*
//     7   1  mtu          ibv_mtu of the sender's port (active MTU, or the configured one)
//     8   2  lid          InfiniBand LID (0 on RoCE)
//    10   2  reserved     zero
//    12   4  data_qpn     QP that carries frames (RDMA WRITE with immediate into the ring)
//    16   4  ctrl_qpn     QP that carries ring credits (SEND with immediate)
//    20  16  gid          port GID (RoCE: the GID at the chosen index; IB: index 0)
//    36   8  ring_addr    virtual address of the receive ring
//    44   4  ring_rkey    its rkey
//    48   4  ring_slots   slots in the ring = data receives pre-posted
//    52   4  slot_bytes   payload bytes per slot (each slot is kSlotHeaderRoom + slot_bytes long)
//    56   4  ctrl_recvs   receives pre-posted on ctrl_qpn (bounds credit messages in flight)
//    60   4  psn          initial packet sequence number of both sender QPs (24 bits)
// decode() validates everything that can be checked alone (magic, version, ranges) and returns
// protocol_error naming the field. Pure functions; thread-safe.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"

namespace tictac::verbs {

inline constexpr std::uint32_t kQpInfoMagic = 0x50515654;  // bytes "TVQP"
inline constexpr std::uint16_t kQpInfoVersion = 2;
inline constexpr std::size_t kQpInfoBytes = 64;
// The connector's last handshake byte: "my QPs are ready to receive".
inline constexpr std::byte kReadyByte{0x52};

struct QpInfo {
  std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  ibv_mtu mtu = IBV_MTU_1024;
  std::uint16_t lid = 0;
  std::uint32_t data_qpn = 0;
  std::uint32_t ctrl_qpn = 0;
  ibv_gid gid{};
  std::uint64_t ring_addr = 0;
  std::uint32_t ring_rkey = 0;
  std::uint32_t ring_slots = 0;
  std::uint32_t slot_bytes = 0;
  std::uint32_t ctrl_recvs = 0;
  std::uint32_t psn = 0;
};

std::array<std::byte, kQpInfoBytes> encode(const QpInfo& info);
Result<QpInfo> decode_qp_info(std::span<const std::byte> bytes);

struct VerbsConfig;
// The limits this side sets on what a peer may make it allocate (VerbsConfig's
// peer_slot_bytes_limit / peer_ring_slots_limit): resource_exhausted naming the field, the value
// and the TICTAC_VERBS_MAX_PEER_* variable to raise. Call before registering anything for the peer.
Status check_peer_limits(const QpInfo& peer, const VerbsConfig& config);

}  // namespace tictac::verbs
