#include "common/random.h"

#include <numeric>
#include <utility>

namespace tictac {
namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t Rng::below(std::uint64_t n) {
  // Accept draws below the largest multiple of n; the rest would bias small values.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return x % n;
}

std::uint64_t Rng::uniform_u64(std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t span = hi - lo;
  if (span == UINT64_MAX) return engine_();
  return lo + below(span + 1);
}

int Rng::uniform_int(int lo, int hi) {
  const auto span = static_cast<std::uint64_t>(static_cast<std::int64_t>(hi) - lo);
  return static_cast<int>(static_cast<std::int64_t>(lo) + static_cast<std::int64_t>(uniform_u64(0, span)));
}

std::vector<int> Rng::permutation(int n) {
  std::vector<int> p(static_cast<std::size_t>(n > 0 ? n : 0));
  std::iota(p.begin(), p.end(), 0);
  for (std::size_t i = p.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(below(i));
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  std::uint64_t h = splitmix(seed);
  h = splitmix(h ^ a);
  h = splitmix(h ^ b);
  return splitmix(h ^ c);
}

}  // namespace tictac
