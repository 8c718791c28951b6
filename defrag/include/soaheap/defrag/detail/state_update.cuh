#pragma once
/// @file detail/state_update.cuh
/// @brief Pass step 4 (paper §3.5): sources become free; targets get active/defrag from their new
///        fill level. Also the warp-combined block updates of the ordered run's claim and release.

#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Returns emptied block @p block of class @p c to the free state (clearing its bitmaps in the order
/// that keeps defrag ⇒ active ⇒ allocated at every instant) and counts it freed.
template <class View>
SOAHEAP_HD inline void release_emptied_block(const View& view, std::uint64_t block, int c) {
  BlockHeader& header = view.headers[block];
  atomic_store(&header.run, 0u);
  atomic_store(&header.allocation, kInvalidatedBitmap);
  view.defrag_candidates(c).clear(block);
  view.active_blocks(c).clear(block);
  view.allocated_blocks(c).clear(block);
  view.count_block_freed();
  memory_fence();
  view.free_blocks().set(block);
}

/// Sets (@p value) or clears the bit of @p block in @p bitmap for the lanes whose @p flag is set.
/// The lanes of a converged warp whose blocks share a level-0 word update it with one atomic: the
/// ordered run claims and releases runs of neighbouring blocks, whose bits would otherwise cost up
/// to 64 atomics queued on one word. Whole warps call it (lanes with nothing to do pass false).
template <class Bitmap>
SOAHEAP_HD inline void update_block_bit_in_warp(const Bitmap& bitmap, std::uint64_t block, bool flag, bool value) {
#if SOAHEAP_DEVICE_CODE
  if (whole_warp_converged()) {
    const std::uint64_t word = block / 64;
    const unsigned peers = __match_any_sync(kFullWarp, word);  // lanes of one word: one group each
    const std::uint64_t bit = flag ? std::uint64_t{1} << (block % 64) : 0;
    const std::uint64_t mask = (std::uint64_t{__reduce_or_sync(peers, static_cast<unsigned>(bit >> 32))} << 32) |
                               __reduce_or_sync(peers, static_cast<unsigned>(bit));
    if ((peers & lanes_below()) == 0 && mask != 0) {
      if (value) {
        bitmap.set_in_word(word, mask);
      } else {
        bitmap.clear_in_word(word, mask);
      }
    }
    return;
  }
#endif
  if (flag) bitmap.assign(block, value);
}

/// View::count_block_taken (or count_block_freed) for the lanes whose @p counted is set: one atomic
/// on the heap's block counter (and one on its peak) per converged warp instead of one or two per
/// block, all on the same two words. Whole warps call it.
template <class View>
SOAHEAP_HD inline void count_blocks_in_warp(const View& view, bool counted, bool taken) {
#if SOAHEAP_DEVICE_CODE
  if (whole_warp_converged()) {
    const unsigned lanes = __ballot_sync(kFullWarp, counted);
    if (lanes == 0 || (lanes & lanes_below()) != 0 || !counted) return;  // the lowest counted lane adds
    const auto count = static_cast<std::uint64_t>(__popc(lanes));
    if (taken) {
      atomic_max(&view.state->peak_allocated_blocks, atomic_fetch_add(&view.state->allocated_blocks, count) + count);
    } else {
      atomic_add_no_return(&view.state->allocated_blocks, std::uint64_t{0} - count);
    }
    return;
  }
#endif
  if (!counted) return;
  if (taken) {
    view.count_block_taken();
  } else {
    view.count_block_freed();
  }
}

/// release_emptied_block with the bitmap words and the block counter updated once per warp
/// (update_block_bit_in_warp, count_blocks_in_warp). Whole warps call it.
template <class View>
SOAHEAP_HD inline void release_emptied_block_in_warp(const View& view, std::uint64_t block, int c) {
  BlockHeader& header = view.headers[block];
  atomic_store(&header.run, 0u);
  atomic_store(&header.allocation, kInvalidatedBitmap);
  update_block_bit_in_warp(view.defrag_candidates(c), block, true, false);
  update_block_bit_in_warp(view.active_blocks(c), block, true, false);
  update_block_bit_in_warp(view.allocated_blocks(c), block, true, false);
  count_blocks_in_warp(view, true, false);
  memory_fence();
  update_block_bit_in_warp(view.free_blocks(), block, true, true);
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
