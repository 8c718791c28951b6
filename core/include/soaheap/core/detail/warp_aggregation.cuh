#pragma once
/// @file detail/warp_aggregation.cuh
/// @brief Counters that a converged warp updates with one atomic instead of one per lane.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Adds @p value to @p counter and returns the old value plus the values of lower lanes adding to
/// the same counter: one atomic per counter and warp when the whole warp calls it together (lanes
/// may name different counters: enumeration targets, defrag windows), one per thread otherwise.
/// Every shuffle names the whole warp, so no lane can read a leader that has not arrived; a
/// partial group is not aggregated (see "Warp aggregation" in docs/architecture.md). Callers keep
/// their warps whole by letting lanes with nothing to count add 0 rather than skip the call; a
/// warp whose total is 0 issues no atomic, and the result is meaningful only to lanes adding more
/// than 0.
SOAHEAP_HD inline std::uint64_t aggregated_fetch_add(std::uint64_t* counter, std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  if (!whole_warp_converged()) return value == 0 ? 0 : atomic_fetch_add(counter, value);
  const unsigned peers = __match_any_sync(kFullWarp, reinterpret_cast<std::uint64_t>(counter));
  const unsigned below = lanes_below();
  std::uint64_t before_me = 0;
  std::uint64_t total = 0;
  if (peers == kFullWarp) {  // one counter for the warp (the common case): a five-step scan
    std::uint64_t inclusive = value;
    for (int offset = 1; offset < 32; offset *= 2) {
      const std::uint64_t lower = __shfl_up_sync(kFullWarp, inclusive, offset);
      if (lane_id() >= offset) inclusive += lower;
    }
    total = __shfl_sync(kFullWarp, inclusive, 31);
    std::uint64_t base = 0;
    if (below == 0 && total != 0) base = atomic_fetch_add(counter, total);
    return __shfl_sync(kFullWarp, base, 0) + inclusive - value;
  }
  for (int lane = 0; lane < 32; ++lane) {
    const std::uint64_t other = __shfl_sync(kFullWarp, value, lane);
    if ((peers >> lane) & 1u) {
      total += other;
      if ((below >> lane) & 1u) before_me += other;
    }
  }
  std::uint64_t base = 0;
  if ((peers & below) == 0 && total != 0) base = atomic_fetch_add(counter, total);  // the first lane of its counter
  return __shfl_sync(kFullWarp, base, __ffs(static_cast<int>(peers)) - 1) + before_me;
#else
  return atomic_fetch_add(counter, value);
#endif
}

/// aggregated_fetch_add for counters whose old value nobody needs: the lanes of a converged warp
/// that name the same counter add with one reduction (atomic_add_no_return) that no lane waits
/// for. A kernel whose threads add to several contended counters otherwise waits for one contended
/// round trip per counter.
/// Same rules as aggregated_fetch_add: whole warps call it, lanes with nothing to count add 0.
SOAHEAP_HD inline void aggregated_add(std::uint64_t* counter, std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  if (!whole_warp_converged()) {
    if (value != 0) atomic_add_no_return(counter, value);
    return;
  }
  const unsigned peers = __match_any_sync(kFullWarp, reinterpret_cast<std::uint64_t>(counter));
  std::uint64_t total = 0;
  if (peers == kFullWarp) {
    total = whole_warp_sum(value);
  } else {
    for (int lane = 0; lane < 32; ++lane) {
      const std::uint64_t other = __shfl_sync(kFullWarp, value, lane);
      if ((peers >> lane) & 1u) total += other;
    }
  }
  if ((peers & lanes_below()) == 0 && total != 0) atomic_add_no_return(counter, total);
#else
  atomic_add_no_return(counter, value);
#endif
}

}  // namespace soaheap::detail
