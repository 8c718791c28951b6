#pragma once
/// @file curand_kernel.h
/// @brief Stands in for cuRAND's device API on the host (see cuda_on_host.h): the same calls, a
///        different generator (splitmix64), so host runs draw other numbers than GPU runs.

#include <cstdint>

struct curandState {
  std::uint64_t state = 0;
};
using curandState_t = curandState;  // cuRAND's default generator's state has both names

inline std::uint64_t soaheap_host_splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline void curand_init(unsigned long long seed, unsigned long long subsequence, unsigned long long offset,
                        curandState* state) {
  state->state = seed * 0x9e3779b97f4a7c15ull ^ (subsequence + 1) * 0xd1b54a32d192ed03ull;
  for (unsigned long long i = 0; i < offset; ++i) soaheap_host_splitmix64(state->state);
}

/// Uniform in (0, 1], as cuRAND's.
inline float curand_uniform(curandState* state) {
  return static_cast<float>((soaheap_host_splitmix64(state->state) >> 40) + 1) * (1.0f / 16777216.0f);
}

inline unsigned curand(curandState* state) {
  return static_cast<unsigned>(soaheap_host_splitmix64(state->state) >> 32);
}
