// VerbsConfig: the tunables of the verbs backend, read from TICTAC_VERBS_* environment variables
// (declared once, in config.cc, with defaults and help text; `tictac info --tunables` lists them).
//
//   TICTAC_VERBS_DEVICE         ""      device ("mlx5_0") or device and port ("mlx5_0:2");
//                                       empty = the first ACTIVE port of any device
//   TICTAC_VERBS_GID_INDEX      -1      GID index for RoCE (-1 = the first IPv4-mapped GID, the
//                                       usual RoCE v2 entry, else index 0); unused on InfiniBand
//   TICTAC_VERBS_SL             0       InfiniBand service level (0..15)
//   TICTAC_VERBS_TRAFFIC_CLASS  0       GRH traffic class for RoCE (0..255; DSCP << 2)
//   TICTAC_VERBS_MTU            0       path MTU in bytes (256..4096); 0 = the port's active MTU
//   TICTAC_VERBS_SLOT_BYTES     64K     payload bytes per receive-ring slot (frames larger than a
//                                       slot are split into several slots)
//   TICTAC_VERBS_RING_SLOTS     32      slots per peer and direction: bytes in flight per peer
//   TICTAC_VERBS_SIGNAL_EVERY   16      request a send completion at least every N work requests
//   TICTAC_VERBS_CQ_ENTRIES     16384   entries of the shared completion queue (bounds the peers:
//                                       each reserves kCqEntriesPerSlot x TICTAC_VERBS_RING_SLOTS)
//   TICTAC_VERBS_RETRY_CNT      7       transport retries before "retry exceeded" (0..7)
//   TICTAC_VERBS_RNR_RETRY      7       receiver-not-ready retries (0..7; 7 = forever)
//   TICTAC_VERBS_TIMEOUT        14      local ACK timeout exponent: 4.096 us * 2^N (1..31)
//   TICTAC_VERBS_MIN_RNR_TIMER  12      RNR NAK timer code (1..31; 12 = 0.64 ms)
//   TICTAC_VERBS_ZERO_COPY      1       1 = rendezvous messages go by RDMA WRITE straight into the
//                                       receiver's buffer (each side decides for its own part:
//                                       exporting receives, writing into exports); 0 = ring only
//   TICTAC_VERBS_ZERO_COPY_MIN_BYTES 32K  messages smaller than this keep the ring (0..1G)
//   TICTAC_VERBS_MAX_PEER_SLOT_BYTES 1M   the largest slot a peer may announce (256..64M); this
//                                       side registers a staging ring of up to
//                                       TICTAC_VERBS_RING_SLOTS x (slot + 64) bytes for it. At
//                                       least TICTAC_VERBS_SLOT_BYTES (peers like us are accepted)
//   TICTAC_VERBS_MAX_PEER_RING_SLOTS 1024 the most ring slots / control receives a peer may
//                                       announce (1..4096); at least TICTAC_VERBS_RING_SLOTS
// A peer whose QpInfo exceeds a limit is refused before this side registers anything for it,
// with an error naming the limit (check_peer_limits).
// Plain value; thread-safe to copy. from_env() reports a bad variable as invalid_argument naming
// it; validate() rejects out-of-range values with the variable's name.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace tictac::verbs {

struct VerbsConfig {
  std::string device;
  int gid_index = -1;
  int service_level = 0;
  int traffic_class = 0;
  int mtu_bytes = 0;
  std::uint32_t slot_bytes = 64 << 10;
  std::uint32_t ring_slots = 32;
  std::uint32_t signal_every = 16;
  std::uint32_t cq_entries = 16384;
  int retry_cnt = 7;
  int rnr_retry = 7;
  int timeout = 14;
  int min_rnr_timer = 12;
  bool zero_copy = true;
  std::uint64_t zero_copy_min_bytes = 32 << 10;
  std::uint32_t max_peer_slot_bytes = 1 << 20;
  std::uint32_t max_peer_ring_slots = 1024;

  static Result<VerbsConfig> from_env();
  Status validate() const;

  // Registered bytes per peer: the receive ring plus the send staging ring (both directions
  // use rings of this shape when both peers run the same configuration).
  std::uint64_t bytes_per_peer() const;
  // The limits applied to a peer's QpInfo: the configured ones, raised to this side's own shape.
  std::uint32_t peer_slot_bytes_limit() const;
  std::uint32_t peer_ring_slots_limit() const;
};

// Bytes in front of each slot's payload: room for the frame header (wire::kHeaderBytes) padded
// to a cache line, so payloads start aligned.
inline constexpr std::uint32_t kSlotHeaderRoom = 64;
// Limits accepted from configuration and from peers.
inline constexpr std::uint32_t kMinSlotBytes = 256;
inline constexpr std::uint32_t kMaxSlotBytes = 64u << 20;
inline constexpr std::uint32_t kMaxRingSlots = 4096;
// Completion-queue entries each endpoint reserves per ring slot: its data QP's send queue holds
// two work requests per slot (a zero-copy RDMA WRITE and the fragment that announces it), and
// data receives, credit sends and credit receives one each.
inline constexpr std::uint32_t kCqEntriesPerSlot = 5;

}  // namespace tictac::verbs
