#include "priority/sim/rng.h"

#include <numeric>

namespace tictac::priority::sim {
namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  std::uint64_t h = splitmix(seed);
  h = splitmix(h ^ a);
  h = splitmix(h ^ b);
  return splitmix(h ^ c);
}

double SimRng::uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

double SimRng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }

std::uint64_t SimRng::below(std::uint64_t n) {
  // Accept draws below the largest multiple of n; the rest would bias small values.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  std::uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return x % n;
}

std::vector<int> SimRng::permutation(int n) {
  std::vector<int> p(static_cast<std::size_t>(n > 0 ? n : 0));
  std::iota(p.begin(), p.end(), 0);
  for (std::size_t i = p.size(); i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(below(i));
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

}  // namespace tictac::priority::sim
