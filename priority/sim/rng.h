// SimRng: the simulator's seeded random numbers, built directly on std::mt19937_64 with our own
// conversions (the standard distributions differ between library implementations, ours do
// not), so a seed gives the same run on every platform. Not thread-safe; a value type.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tictac::priority::sim {

// Mixes a seed with stream identifiers (iteration, worker, purpose) into an independent seed
// (splitmix64 finaliser applied to each part in turn).
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b, std::uint64_t c);

class SimRng {
 public:
  explicit SimRng(std::uint64_t seed) : engine_(seed) {}
  // Uniform in [0, 1), 53 random bits.
  double uniform01();
  // Uniform in [lo, hi].
  double uniform(double lo, double hi);
  // Uniform integer in [0, n), n > 0, without modulo bias (rejection sampling).
  std::uint64_t below(std::uint64_t n);
  // A uniformly random permutation of 0..n-1 (Fisher-Yates).
  std::vector<int> permutation(int n);

 private:
  std::mt19937_64 engine_;
};

}  // namespace tictac::priority::sim
