// Ring slot layout of the verbs backend (internal; QpInfo version 2).
//
// A slot is kSlotHeaderRoom bytes of header room followed by the peer's slot_bytes of payload.
// The first fragment of a frame fills the header room: the wire header (wire::kHeaderBytes =
// 56 bytes), then one SlotKind byte at kSlotKindOffset, then zeros. Later fragments of the same
// frame write only payload. The kind says what the payload area holds:
//   frame         the frame's payload bytes (its first min(length, slot_bytes) of them)
//   ready_export  a READY frame (length 0) followed by a DestinationExport (kExportBytes): where
//                 the peer may RDMA WRITE the message's DATA (address, rkey, length)
//   written       a DATA frame whose payload the peer already RDMA-wrote into our exported
//                 destination, on the same QP just before this fragment (RC order: it landed)
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/verbs/backend/config.h"
#include "transport/wire.h"

namespace tictac::verbs {

enum class SlotKind : std::uint8_t { frame = 0, ready_export = 1, written = 2 };
inline constexpr std::size_t kSlotKindOffset = transport::wire::kHeaderBytes;
static_assert(kSlotKindOffset < kSlotHeaderRoom, "the slot kind must fit the header room");

// Where a receiver lets its peer write one message's bytes.
struct DestinationExport {
  std::uint64_t addr = 0;    // virtual address of byte 0 of the message
  std::uint32_t rkey = 0;
  std::uint64_t length = 0;  // the message's bytes
};
inline constexpr std::uint32_t kExportBytes = 20;  // little-endian addr, rkey, length
static_assert(kExportBytes <= kMinSlotBytes, "an export must fit the smallest slot");

inline void encode_export(const DestinationExport& e, std::byte* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(e.addr >> (8 * i));
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<std::byte>(e.rkey >> (8 * i));
  for (int i = 0; i < 8; ++i) out[12 + i] = static_cast<std::byte>(e.length >> (8 * i));
}

inline DestinationExport decode_export(const std::byte* in) {
  DestinationExport e;
  for (int i = 0; i < 8; ++i) e.addr |= std::uint64_t{std::to_integer<std::uint8_t>(in[i])} << (8 * i);
  for (int i = 0; i < 4; ++i) e.rkey |= std::uint32_t{std::to_integer<std::uint8_t>(in[8 + i])} << (8 * i);
  for (int i = 0; i < 8; ++i) e.length |= std::uint64_t{std::to_integer<std::uint8_t>(in[12 + i])} << (8 * i);
  return e;
}

}  // namespace tictac::verbs
