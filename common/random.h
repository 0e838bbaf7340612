// Rng: the project's one seeded random-number source. std::mt19937_64's output sequence is fixed
// by the standard but the std:: distributions are not (they differ between library versions), so
// every mapping to a range is written here: a seed gives the same graphs, orders and simulated
// runs on every platform. Not thread-safe; a value type (one per stream of draws).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tictac {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // Uniform integer in [0, n), n > 0, without modulo bias (rejection sampling).
  std::uint64_t below(std::uint64_t n);
  // Uniform integer in [lo, hi] (inclusive), unbiased.
  std::uint64_t uniform_u64(std::uint64_t lo, std::uint64_t hi);
  int uniform_int(int lo, int hi);
  // Uniform in [0, 1) with 53 random bits.
  double uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }
  bool chance(double p) { return uniform01() < p; }
  // A uniformly random permutation of 0..n-1 (Fisher-Yates from the top).
  std::vector<int> permutation(int n);

 private:
  std::mt19937_64 engine_;
};

// Mixes a seed with stream identifiers (e.g. iteration, worker, purpose) into an independent
// seed (splitmix64 finaliser applied to each part in turn).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c);

}  // namespace tictac
