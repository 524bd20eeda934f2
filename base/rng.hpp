// The one deterministic random source. Every random choice in the harness
// comes from an explicitly seeded Rng; nothing reads a clock or a global
// generator. The algorithm (SplitMix64 seeding a xoshiro256**) is fixed here,
// so the same seed gives the same bits on every platform and compiler: the
// standard library's distributions are implementation-defined, so none is used.
#pragma once

#include <cstdint>

#include "base/assert.hpp"

namespace infonce {

// SplitMix64 step: used to expand seeds and to derive child seeds.
constexpr std::uint64_t splitmix64(std::uint64_t& state) {
  state += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A seed for a named sub-stream of `seed` (e.g. rank r's generator).
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  std::uint64_t state = seed ^ (0xd1b54a32d192ed03ULL * (stream + 1));
  splitmix64(state);
  return splitmix64(state);
}

class Rng {
 public:
  explicit constexpr Rng(std::uint64_t seed) {
    std::uint64_t state = seed;
    for (auto& word : s_) word = splitmix64(state);
  }

  constexpr std::uint64_t next_u64() {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform integer in [0, bound), bound >= 1, without modulo bias (Lemire).
  constexpr std::uint64_t below(std::uint64_t bound) {
    INFONCE_ASSERT(bound >= 1);
    std::uint64_t x = next_u64();
    __uint128_t m = static_cast<__uint128_t>(x) * bound;
    std::uint64_t low = static_cast<std::uint64_t>(m);
    if (low < bound) {
      const std::uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        x = next_u64();
        m = static_cast<__uint128_t>(x) * bound;
        low = static_cast<std::uint64_t>(m);
      }
    }
    return static_cast<std::uint64_t>(m >> 64);
  }

  // Uniform integer in [lo, hi], lo <= hi.
  constexpr std::int64_t between(std::int64_t lo, std::int64_t hi) {
    INFONCE_ASSERT(lo <= hi);
    return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
  }

  // Uniform double in [0, 1) with 53 random bits.
  constexpr double unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Standard normal (Box-Muller without caching, so a draw is a pure function of state).
  double normal();

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4]{};
};

}  // namespace infonce
