#pragma once
/// @file requests.cuh
/// @brief Conflict resolution in two phases, as the SMMO applications use it when many objects
///        want one place (a cell to move to, a partner to mate with): in the request phase every
///        object posts a key with atomic max; in the resolve phase an object whose key is still
///        the maximum has won. Keys carry a random priority, so no object is favoured, and the
///        requester's id, so that no two keys are equal.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap_app {

/// @brief The key of one request: @p random_priority in the high 32 bits (made odd, so that a key
///        is never 0, which means "no request"), the 32-bit @p requester in the low bits.
SOAHEAP_HD inline std::uint64_t request_key(std::uint64_t random_priority, std::uint32_t requester) {
  return ((random_priority | 1ULL) << 32) | requester;
}

/// @brief Raises @p *address to @p value if that is larger (a request of the request phase).
///        One native 64-bit atomic max (not a CAS loop): requests for one place contend only in
///        hardware.
SOAHEAP_HD inline void atomic_max(std::uint64_t* address, std::uint64_t value) {
  soaheap::detail::atomic_max(address, value);
}

}  // namespace soaheap_app
