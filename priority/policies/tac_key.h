// The normative TAC ordering key (SCHEDULING.md section 5.3), shared by the incremental TAC and
// the reference so that both order candidates identically. Header-only value type.
//
// A recv r with M = Time(r) and P = P(r) is in group 0 when M < P (keyed by M ascending) and in
// group 1 otherwise (keyed by P descending); ties go to the smaller M+ (infinity last), then to
// the byte-wise smaller name, which the caller supplies as a rank (position in name order).
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace tictac::priority::policies {

inline constexpr std::int64_t kInfinitePs = std::numeric_limits<std::int64_t>::max();

struct TacPrimary {
  std::int8_t group = 0;
  std::int64_t key = 0;  // M for group 0, -P for group 1
  auto operator<=>(const TacPrimary&) const = default;
};

inline TacPrimary tac_primary(std::int64_t m, std::int64_t p) {
  return m < p ? TacPrimary{0, m} : TacPrimary{1, -p};
}

struct TacKey {
  TacPrimary primary;
  std::int64_t mplus = kInfinitePs;
  std::uint32_t name_rank = 0;
  auto operator<=>(const TacKey&) const = default;
};

}  // namespace tictac::priority::policies
