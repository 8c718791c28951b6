#pragma once
/// @file curand_state.cuh
/// @brief cuRAND's default generator (XORWOW) as a field of a managed object, on both backends:
///        the programs of examples/dynasoar_* keep a `curandState_t` in their objects and draw from
///        it as DynaSOAr's programs do, so that on the GPU they draw the very same numbers.
///
/// On the GPU these are cuRAND's own functions. cuRAND's device functions do not exist on the host
/// backend, so there the state is seeded from a hash of (seed, subsequence) instead of cuRAND's
/// skip-ahead (a different stream, same kind of numbers) and advanced by the XORWOW recurrence
/// (Marsaglia, "Xorshift RNGs", 2003), which is what curand() computes.

#include <soaheap/base/portability.cuh>

#include "examples/common/counter_hash.cuh"

#include <curand_kernel.h>

#include <cstdint>

namespace soaheap_app {

/// @brief curand_init(seed, subsequence, 0, state).
SOAHEAP_HD inline void random_init(unsigned long long seed, unsigned long long subsequence, curandState_t* state) {
#if defined(__CUDA_ARCH__)
  curand_init(seed, subsequence, 0, state);
#else
  std::uint64_t bits = hash3(seed, 0x5eed, subsequence);
  for (int i = 0; i < 5; ++i) {
    state->v[i] = static_cast<unsigned int>(bits >> 32) | 1u;  // never all zero
    bits = splitmix64_finalise(bits + 0x9e3779b97f4a7c15ULL);
  }
  state->d = static_cast<unsigned int>(bits);
  state->boxmuller_flag = 0;
  state->boxmuller_flag_double = 0;
  state->boxmuller_extra = 0.0f;
  state->boxmuller_extra_double = 0.0;
#endif
}

/// @brief curand(state): the next 32 random bits.
SOAHEAP_HD inline unsigned int random_bits(curandState_t* state) {
#if defined(__CUDA_ARCH__)
  return curand(state);
#else
  const unsigned int t = state->v[0] ^ (state->v[0] >> 2);
  state->v[0] = state->v[1];
  state->v[1] = state->v[2];
  state->v[2] = state->v[3];
  state->v[3] = state->v[4];
  state->v[4] = (state->v[4] ^ (state->v[4] << 4)) ^ (t ^ (t << 1));
  state->d += 362437u;
  return state->v[4] + state->d;
#endif
}

/// @brief curand_uniform(state): a float in (0, 1].
SOAHEAP_HD inline float random_uniform(curandState_t* state) {
#if defined(__CUDA_ARCH__)
  return curand_uniform(state);
#else
  constexpr float kInverse = 2.3283064e-10f;  // 2^-32
  return static_cast<float>(random_bits(state)) * kInverse + kInverse / 2.0f;
#endif
}

}  // namespace soaheap_app
