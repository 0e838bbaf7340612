#include "transport/verbs/backend/config.h"

#include <algorithm>

#include "common/log.h"
#include "common/tunables.h"

namespace tictac::verbs {
namespace {

struct DeviceTunable {
  DeviceTunable() {
    register_tunable(TunableInfo{kName, "\"\"",
                                 "verbs device (mlx5_0) or device:port (mlx5_0:2); empty = the "
                                 "first ACTIVE port"});
  }
  static constexpr const char* kName = "TICTAC_VERBS_DEVICE";
};
const DeviceTunable kDevice;
const IntTunable kGidIndex{"TICTAC_VERBS_GID_INDEX", -1,
                           "RoCE GID index; -1 = the first IPv4-mapped GID (RoCE v2), else 0"};
const IntTunable kServiceLevel{"TICTAC_VERBS_SL", 0, "InfiniBand service level (0..15)"};
const IntTunable kTrafficClass{"TICTAC_VERBS_TRAFFIC_CLASS", 0,
                               "RoCE GRH traffic class (0..255, DSCP << 2)"};
const IntTunable kMtu{"TICTAC_VERBS_MTU", 0,
                      "path MTU in bytes (256, 512, 1024, 2048, 4096); 0 = the port's active MTU"};
const SizeTunable kSlotBytes{"TICTAC_VERBS_SLOT_BYTES", 64 << 10,
                             "payload bytes per receive-ring slot (256..64M); larger frames span "
                             "several slots"};
const IntTunable kRingSlots{"TICTAC_VERBS_RING_SLOTS", 32,
                            "receive-ring slots per peer (1..4096); registered memory per peer is "
                            "2 x slots x (slot bytes + 64)"};
const IntTunable kSignalEvery{"TICTAC_VERBS_SIGNAL_EVERY", 16,
                              "request a send completion at least every N work requests (1..4096)"};
const IntTunable kCqEntries{"TICTAC_VERBS_CQ_ENTRIES", 16384,
                            "entries of the shared completion queue; each peer reserves "
                            "5 x TICTAC_VERBS_RING_SLOTS"};
const IntTunable kRetryCnt{"TICTAC_VERBS_RETRY_CNT", 7,
                           "transport retries before a work request fails with retry exceeded (0..7)"};
const IntTunable kRnrRetry{"TICTAC_VERBS_RNR_RETRY", 7,
                           "receiver-not-ready retries (0..7; 7 = retry forever)"};
const IntTunable kTimeout{"TICTAC_VERBS_TIMEOUT", 14,
                          "local ACK timeout exponent: 4.096 us x 2^N (1..31; 14 = 67 ms)"};
const IntTunable kMinRnrTimer{"TICTAC_VERBS_MIN_RNR_TIMER", 12,
                              "RNR NAK timer code (1..31; 12 = 0.64 ms)"};
const BoolTunable kZeroCopy{"TICTAC_VERBS_ZERO_COPY", true,
                            "1 = rendezvous messages are RDMA-written straight into the receiver's "
                            "buffer (registered per transfer); 0 = every byte goes through the rings"};
const SizeTunable kZeroCopyMinBytes{"TICTAC_VERBS_ZERO_COPY_MIN_BYTES", 32 << 10,
                                    "messages smaller than this keep the ring even with "
                                    "TICTAC_VERBS_ZERO_COPY=1 (0..1G)"};

const SizeTunable kMaxPeerSlotBytes{"TICTAC_VERBS_MAX_PEER_SLOT_BYTES", 1 << 20,
                                    "largest receive-ring slot a peer may announce (256..64M; at "
                                    "least TICTAC_VERBS_SLOT_BYTES); bounds the staging memory "
                                    "registered per peer. A larger one is refused before any "
                                    "registration"};
const IntTunable kMaxPeerRingSlots{"TICTAC_VERBS_MAX_PEER_RING_SLOTS", 1024,
                                   "most ring slots / control receives a peer may announce "
                                   "(1..4096; at least TICTAC_VERBS_RING_SLOTS); more is refused"};

Status out_of_range(const char* name, std::int64_t value, const char* range) {
  return invalid_argument(std::string(name) + "=" + std::to_string(value) +
                          " is out of range " + range);
}

}  // namespace

Result<VerbsConfig> VerbsConfig::from_env() {
  VerbsConfig c;
  c.device = env_or_empty(DeviceTunable::kName);
  struct IntField {
    const IntTunable* tunable;
    int* field;
  };
  for (const IntField& f : {IntField{&kGidIndex, &c.gid_index}, IntField{&kServiceLevel, &c.service_level},
                            IntField{&kTrafficClass, &c.traffic_class}, IntField{&kMtu, &c.mtu_bytes},
                            IntField{&kRetryCnt, &c.retry_cnt}, IntField{&kRnrRetry, &c.rnr_retry},
                            IntField{&kTimeout, &c.timeout}, IntField{&kMinRnrTimer, &c.min_rnr_timer}}) {
    Result<std::int64_t> v = f.tunable->get();
    TICTAC_RETURN_IF_ERROR(v);
    if (*v < -1 || *v > 1 << 20) return out_of_range(f.tunable->name(), *v, "(see tictac info --tunables)");
    *f.field = static_cast<int>(*v);
  }
  Result<std::uint64_t> slot = kSlotBytes.get();
  TICTAC_RETURN_IF_ERROR(slot);
  if (*slot < kMinSlotBytes || *slot > kMaxSlotBytes) {
    return out_of_range(kSlotBytes.name(), static_cast<std::int64_t>(*slot), "256..64M");
  }
  c.slot_bytes = static_cast<std::uint32_t>(*slot);
  struct CountField {
    const IntTunable* tunable;
    std::uint32_t* field;
  };
  for (const CountField& f : {CountField{&kRingSlots, &c.ring_slots}, CountField{&kSignalEvery, &c.signal_every},
                              CountField{&kCqEntries, &c.cq_entries}}) {
    Result<std::int64_t> v = f.tunable->get();
    TICTAC_RETURN_IF_ERROR(v);
    if (*v < 1 || *v > (std::int64_t{1} << 24)) {
      return out_of_range(f.tunable->name(), *v, "1..16777216");
    }
    *f.field = static_cast<std::uint32_t>(*v);
  }
  Result<bool> zero_copy = kZeroCopy.get();
  TICTAC_RETURN_IF_ERROR(zero_copy);
  c.zero_copy = *zero_copy;
  Result<std::uint64_t> zc_min = kZeroCopyMinBytes.get();
  TICTAC_RETURN_IF_ERROR(zc_min);
  c.zero_copy_min_bytes = *zc_min;
  Result<std::uint64_t> peer_slot = kMaxPeerSlotBytes.get();
  TICTAC_RETURN_IF_ERROR(peer_slot);
  if (*peer_slot < kMinSlotBytes || *peer_slot > kMaxSlotBytes) {
    return out_of_range(kMaxPeerSlotBytes.name(), static_cast<std::int64_t>(*peer_slot), "256..64M");
  }
  c.max_peer_slot_bytes = static_cast<std::uint32_t>(*peer_slot);
  Result<std::int64_t> peer_slots = kMaxPeerRingSlots.get();
  TICTAC_RETURN_IF_ERROR(peer_slots);
  if (*peer_slots < 1 || *peer_slots > kMaxRingSlots) return out_of_range(kMaxPeerRingSlots.name(), *peer_slots, "1..4096");
  c.max_peer_ring_slots = static_cast<std::uint32_t>(*peer_slots);
  TICTAC_RETURN_IF_ERROR(c.validate());
  TICTAC_LOG(debug) << "verbs config: TICTAC_VERBS_DEVICE=" << c.device
                    << " TICTAC_VERBS_GID_INDEX=" << c.gid_index << " TICTAC_VERBS_SL=" << c.service_level
                    << " TICTAC_VERBS_TRAFFIC_CLASS=" << c.traffic_class << " TICTAC_VERBS_MTU=" << c.mtu_bytes
                    << " TICTAC_VERBS_SLOT_BYTES=" << c.slot_bytes
                    << " TICTAC_VERBS_RING_SLOTS=" << c.ring_slots
                    << " TICTAC_VERBS_SIGNAL_EVERY=" << c.signal_every
                    << " TICTAC_VERBS_CQ_ENTRIES=" << c.cq_entries << " TICTAC_VERBS_RETRY_CNT=" << c.retry_cnt
                    << " TICTAC_VERBS_RNR_RETRY=" << c.rnr_retry << " TICTAC_VERBS_TIMEOUT=" << c.timeout
                    << " TICTAC_VERBS_MIN_RNR_TIMER=" << c.min_rnr_timer
                    << " TICTAC_VERBS_ZERO_COPY=" << c.zero_copy
                    << " TICTAC_VERBS_ZERO_COPY_MIN_BYTES=" << c.zero_copy_min_bytes
                    << " TICTAC_VERBS_MAX_PEER_SLOT_BYTES=" << c.max_peer_slot_bytes
                    << " TICTAC_VERBS_MAX_PEER_RING_SLOTS=" << c.max_peer_ring_slots;
  return c;
}

Status VerbsConfig::validate() const {
  if (gid_index < -1 || gid_index > 255) return out_of_range(kGidIndex.name(), gid_index, "-1..255");
  if (service_level < 0 || service_level > 15) return out_of_range(kServiceLevel.name(), service_level, "0..15");
  if (traffic_class < 0 || traffic_class > 255) return out_of_range(kTrafficClass.name(), traffic_class, "0..255");
  if (mtu_bytes != 0 && mtu_bytes != 256 && mtu_bytes != 512 && mtu_bytes != 1024 && mtu_bytes != 2048 &&
      mtu_bytes != 4096) {
    return out_of_range(kMtu.name(), mtu_bytes, "{0, 256, 512, 1024, 2048, 4096}");
  }
  if (slot_bytes < kMinSlotBytes || slot_bytes > kMaxSlotBytes) {
    return out_of_range(kSlotBytes.name(), slot_bytes, "256..64M");
  }
  if (ring_slots < 1 || ring_slots > kMaxRingSlots) return out_of_range(kRingSlots.name(), ring_slots, "1..4096");
  if (signal_every < 1 || signal_every > 4096) return out_of_range(kSignalEvery.name(), signal_every, "1..4096");
  if (cq_entries < kCqEntriesPerSlot * ring_slots) {
    return invalid_argument("TICTAC_VERBS_CQ_ENTRIES=" + std::to_string(cq_entries) +
                            " cannot hold even one peer (5 x TICTAC_VERBS_RING_SLOTS = " +
                            std::to_string(kCqEntriesPerSlot * ring_slots) + ")");
  }
  if (retry_cnt < 0 || retry_cnt > 7) return out_of_range(kRetryCnt.name(), retry_cnt, "0..7");
  if (rnr_retry < 0 || rnr_retry > 7) return out_of_range(kRnrRetry.name(), rnr_retry, "0..7");
  if (timeout < 1 || timeout > 31) return out_of_range(kTimeout.name(), timeout, "1..31");
  if (min_rnr_timer < 1 || min_rnr_timer > 31) return out_of_range(kMinRnrTimer.name(), min_rnr_timer, "1..31");
  if (zero_copy_min_bytes > (std::uint64_t{1} << 30)) {
    return out_of_range(kZeroCopyMinBytes.name(), static_cast<std::int64_t>(zero_copy_min_bytes), "0..1G");
  }
  if (max_peer_slot_bytes < kMinSlotBytes || max_peer_slot_bytes > kMaxSlotBytes) {
    return out_of_range(kMaxPeerSlotBytes.name(), max_peer_slot_bytes, "256..64M");
  }
  if (max_peer_ring_slots < 1 || max_peer_ring_slots > kMaxRingSlots) {
    return out_of_range(kMaxPeerRingSlots.name(), max_peer_ring_slots, "1..4096");
  }
  return Status::Ok();
}

std::uint64_t VerbsConfig::bytes_per_peer() const {
  return 2ull * ring_slots * (std::uint64_t{slot_bytes} + kSlotHeaderRoom);
}

std::uint32_t VerbsConfig::peer_slot_bytes_limit() const { return std::max(max_peer_slot_bytes, slot_bytes); }

std::uint32_t VerbsConfig::peer_ring_slots_limit() const { return std::max(max_peer_ring_slots, ring_slots); }

}  // namespace tictac::verbs
