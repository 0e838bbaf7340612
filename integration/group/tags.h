// Transport tags of a rank group: user point-to-point tags and the group's own collective
// messages share one 64-bit tag space without colliding.
//   user tag t (a c10d int)     -> 0x0000'0000'tttt'tttt  (bit 63 clear)
//   collective seq s, step k    -> 0x8000'0000'0000'0000 | (s << 16) | k   (k < 65536)
//   (s < 2^47: the group's counter from 0, or scoped_seq() below with bit 46 set)
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace tictac::group {

inline constexpr std::uint64_t kCollectiveBit = std::uint64_t{1} << 63;
inline constexpr int kMaxCollectiveSteps = 1 << 16;

inline std::uint64_t user_tag(std::int32_t tag) { return static_cast<std::uint32_t>(tag); }

inline std::uint64_t collective_tag(std::uint64_t seq, int step) {
  return kCollectiveBit | ((seq & ((std::uint64_t{1} << 47) - 1)) << 16) |
         static_cast<std::uint64_t>(step & (kMaxCollectiveSteps - 1));
}

// Sequence numbers of collectives run under a Group::SeqScope (several in flight at once):
// bit 46 set, then the scope's ticket and the scope's call index (8 bits). The group's own
// counter never reaches bit 46, so the two spaces never collide.
inline constexpr std::uint64_t kScopedSeqBit = std::uint64_t{1} << 46;
inline constexpr int kScopedSeqCalls = 1 << 8;
inline std::uint64_t scoped_seq(std::uint64_t ticket, int call) {
  return kScopedSeqBit | ((ticket & ((kScopedSeqBit >> 8) - 1)) << 8) |
         static_cast<std::uint64_t>(call & (kScopedSeqCalls - 1));
}

// A sequence number as error messages show it: "12" (the group's counter) or "c12" / "c12.1"
// (the collective of ticket 12, its first / second sequence number).
inline std::string seq_text(std::uint64_t seq) {
  if ((seq & kScopedSeqBit) == 0) return std::to_string(seq);
  const std::uint64_t call = seq & (kScopedSeqCalls - 1);
  std::string out(1, 'c');
  out.append(std::to_string((seq & ~kScopedSeqBit) >> 8));
  if (call > 0) {
    out.push_back('.');
    out.append(std::to_string(call));
  }
  return out;
}

inline bool is_collective_tag(std::uint64_t tag) { return (tag & kCollectiveBit) != 0; }

}  // namespace tictac::group
