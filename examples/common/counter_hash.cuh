#pragma once
/// @file counter_hash.cuh
/// @brief Counter-based random numbers: a pure function of (seed, salt, a, b), so that device
///        code on every backend and the sequential host reference draw the same values without
///        sharing any generator state.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap_app {

/// @brief The xor-shift-multiply finaliser of splitmix64 with the given shifts: spreads every
///        input bit over the whole word.
SOAHEAP_HD inline std::uint64_t finalise(std::uint64_t x, int shift1, int shift2, int shift3) {
  x ^= x >> shift1;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> shift2;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> shift3);
}

/// @brief splitmix64's own finaliser (shifts 30, 27, 31).
SOAHEAP_HD inline std::uint64_t splitmix64_finalise(std::uint64_t x) { return finalise(x, 30, 27, 31); }

/// @brief A well-mixed 64-bit hash of four words (a splitmix64-style finaliser over their sum of
///        products with odd constants).
SOAHEAP_HD inline std::uint64_t hash4(std::uint64_t seed, std::uint64_t salt, std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ (salt + 1) * 0xc2b2ae3d27d4eb4fULL ^
                    (a + 1) * 0xd6e8feb86659fd93ULL ^ (b + 1) * 0xff51afd7ed558ccdULL;
  return finalise(x, 31, 29, 32);
}

/// @brief A uniform double in [0, 1) from the 53 high bits of hash4().
SOAHEAP_HD inline double uniform(std::uint64_t seed, std::uint64_t salt, std::uint64_t a, std::uint64_t b) {
  return static_cast<double>(hash4(seed, salt, a, b) >> 11) * (1.0 / 9007199254740992.0);
}

/// @brief The three-word sibling of hash4(): the same mixing with one input fewer (the particle
///        applications: nbody, barnes_hut, nbody_baseline).
SOAHEAP_HD inline std::uint64_t hash3(std::uint64_t seed, std::uint64_t salt, std::uint64_t index) {
  std::uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ULL ^ (salt + 1) * 0xc2b2ae3d27d4eb4fULL ^ (index + 1) * 0xd6e8feb86659fd93ULL;
  return finalise(x, 31, 29, 32);
}

/// @brief A uniform float in [0, 1) from the 24 high bits of hash3().
SOAHEAP_HD inline float uniform_float(std::uint64_t seed, std::uint64_t salt, std::uint64_t index) {
  return static_cast<float>(hash3(seed, salt, index) >> 40) * (1.0f / 16777216.0f);
}

/// @brief A three-word hash with splitmix64's finaliser (the grid applications: game_of_life,
///        generation, structure and its baseline). A different stream from hash3(); each
///        application keeps the one its recorded results were made with.
SOAHEAP_HD inline std::uint64_t splitmix_hash3(std::uint64_t seed, std::uint64_t salt, std::uint64_t value) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL ^ salt * 0x94d049bb133111ebULL ^ (value + 1) * 0xd6e8feb86659fd93ULL;
  return splitmix64_finalise(x);
}

}  // namespace soaheap_app
