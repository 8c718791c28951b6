#pragma once
/// @file detail/block_counting.cuh
/// @brief How heap.stats() counts over the heap's blocks: a warp takes a chunk of consecutive
///        blocks, its lanes read every 32nd block (neighbouring headers together), and the warp
///        adds its counters up before one lane adds them to the totals.
///
/// One thread per chunk of 256 blocks read them one after another: traffic's 262,144 indexable
/// blocks were counted by 18 warps, each a chain of 256 dependent loads — 0.29 ms per call on an
/// H200, and the auto policy asks for the statistics at every look.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/detail/tuning.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Threads of a counting launch over @p block_count blocks: a whole warp per chunk.
inline std::uint64_t block_counting_threads(std::uint64_t block_count) {
  return (block_count + kCountingBlocksPerWarp - 1) / kCountingBlocksPerWarp * kCountingLanes;
}

/// Thread @p tid of a counting launch: calls count_block(block, local) for its blocks, then adds
/// the @p kCounters local counters to @p totals. On the device the launch's warps are whole (its
/// thread count is a multiple of 32), so a warp sums its lanes' counters first.
template <int kCounters, class CountBlock>
SOAHEAP_HD void count_blocks(std::uint64_t tid, std::uint64_t block_count, std::uint64_t* totals, const CountBlock& count_block) {
  std::uint64_t local[kCounters] = {};
  const std::uint64_t begin = tid / kCountingLanes * kCountingBlocksPerWarp;
  const std::uint64_t end = begin + kCountingBlocksPerWarp < block_count ? begin + kCountingBlocksPerWarp : block_count;
  for (std::uint64_t block = begin + tid % kCountingLanes; block < end; block += kCountingLanes) count_block(block, local);
  for (int k = 0; k < kCounters; ++k) {
#if SOAHEAP_DEVICE_CODE
    if (__any_sync(kFullWarp, local[k] != 0) == 0) continue;
    const std::uint64_t sum = whole_warp_sum(local[k]);
    if (tid % kCountingLanes == 0) atomic_add_no_return(&totals[k], sum);
#else
    if (local[k] != 0) atomic_fetch_add(&totals[k], local[k]);
#endif
  }
}

}  // namespace soaheap::detail
