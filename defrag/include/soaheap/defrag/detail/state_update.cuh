#pragma once
/// @file detail/state_update.cuh
/// @brief Pass step 4 (paper §3.5): sources become free; targets get active/defrag from their new
///        fill level.

#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Returns emptied block @p block of class @p c to the free state (clearing its bitmaps in the order
/// that keeps defrag ⇒ active ⇒ allocated at every instant) and counts it freed.
template <class View>
SOAHEAP_HD inline void release_emptied_block(const View& view, std::uint64_t block, int c) {
  BlockHeader& header = view.headers[block];
  atomic_store(&header.iteration, 0);
  atomic_store(&header.allocation, kInvalidatedBitmap);
  view.defrag_candidates(c).clear(block);
  view.active_blocks(c).clear(block);
  view.allocated_blocks(c).clear(block);
  view.count_block_freed();
  memory_fence();
  view.free_blocks().set(block);
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
