#pragma once
/// @file counter_hash.cuh
/// @brief Counter-based random numbers: a pure function of (seed, salt, a, b), so that device
///        code on every backend and the sequential host reference draw the same values without
///        sharing any generator state.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap_app {

/// @brief A well-mixed 64-bit hash of four words (a splitmix64-style finaliser over their sum of
///        products with odd constants).
SOAHEAP_HD inline std::uint64_t hash4(std::uint64_t seed, std::uint64_t salt, std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ (salt + 1) * 0xc2b2ae3d27d4eb4fULL ^
                    (a + 1) * 0xd6e8feb86659fd93ULL ^ (b + 1) * 0xff51afd7ed558ccdULL;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 32;
  return x;
}

/// @brief A uniform double in [0, 1) from the 53 high bits of hash4().
SOAHEAP_HD inline double uniform(std::uint64_t seed, std::uint64_t salt, std::uint64_t a, std::uint64_t b) {
  return static_cast<double>(hash4(seed, salt, a, b) >> 11) * (1.0 / 9007199254740992.0);
}

}  // namespace soaheap_app
