#pragma once
/// @file detail/state_update.cuh
/// @brief Pass step 4 (paper §3.5): sources become free; targets get active/defrag from their new
///        fill level.

#include <soaheap/core/detail/kernels.cuh>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Returns emptied block @p block of class @p c to the free state (clearing its bitmaps in the order
/// that keeps defrag ⇒ active ⇒ allocated at every instant); the caller has counted it freed.
template <class View>
SOAHEAP_HD inline void release_counted_block(const View& view, std::uint64_t block, int c) {
  BlockHeader& header = view.headers[block];
  atomic_store(&header.iteration, 0);
  atomic_store(&header.allocation, kInvalidatedBitmap);
  view.defrag_candidates(c).clear(block);
  view.active_blocks(c).clear(block);
  view.allocated_blocks(c).clear(block);
  memory_fence();
  view.free_blocks().set(block);
}

/// release_counted_block, counting the block freed.
template <class View>
SOAHEAP_HD inline void release_emptied_block(const View& view, std::uint64_t block, int c) {
  view.count_block_freed();
  release_counted_block(view, block, c);
}

/// Counts the blocks that the lanes of a warp are about to release with one atomic (hundreds of
/// thousands of blocks freed at once would otherwise queue on one counter). Every lane calls it,
/// with @p freeing false when it releases nothing.
template <class View>
SOAHEAP_HD inline void count_blocks_freed_by_warp(const View& view, bool freeing) {
  aggregated_add(&view.state->allocated_blocks, freeing ? ~std::uint64_t{0} : 0);  // -1 per block
}

/// view.count_block_taken() for the lanes of a warp that take a block, with one atomic that returns
/// for the whole warp (each lane then raises the peak to its own count without waiting). Every
/// lane calls it, with @p taking false when it takes nothing.
template <class View>
SOAHEAP_HD inline void count_blocks_taken_by_warp(const View& view, bool taking) {
  const std::uint64_t before = aggregated_fetch_add(&view.state->allocated_blocks, taking ? 1 : 0);
  if (taking) atomic_max(&view.state->peak_allocated_blocks, before + 1);
}

/// One thread per source block; it also settles the source's n targets (each target has one source,
/// so no block is touched by two threads).
template <class View>
struct UpdateBlockStatesKernel {
  View view;
  PassPlan plan;
  SOAHEAP_HD void operator()(std::uint64_t source) const {
    const int c = plan.class_index;
    release_emptied_block(view, plan.source_block(source), c);
    for (int k = 0; k < plan.factor; ++k) view.refresh_block_state(plan.target_block(source, k), c);
  }
};

}  // namespace soaheap::detail
