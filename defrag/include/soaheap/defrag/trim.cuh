#pragma once
/// @file trim.cuh
/// @brief `soaheap::trim(heap)`: gathers a growable heap's objects toward its start and gives the
///        memory of the free blocks at its end back to the GPU (or the system).
///
/// A growable heap (HeapOptions::max_bytes) takes its lowest free blocks first, so its objects
/// start out near the beginning; when a population falls they leave holes everywhere. trim() first
/// packs every class into its fewest blocks (DefragTarget::minimum), which frees blocks all over the
/// heap; then it picks a cut, the lowest block with at least as many free blocks below it as blocks
/// in use at or above it (and no untyped memory above it: soaheap::malloc memory never moves), and
/// moves the objects above the cut into the lowest free blocks, class by class, in their address
/// order, by ordered compaction from the cut (DefragOptions::first_block: each object moves once and
/// every pointer to it is rewritten; the objects below the cut stay). Last,
/// Heap::release_free_memory() unmaps the whole chunks above the last block in use.

#include <soaheap/core/heap.cuh>
#include <soaheap/defrag/defragment.cuh>
#include <soaheap/defrag/order.cuh>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace soaheap {

/// @brief What trim() did.
struct TrimResult {
  std::uint64_t resident_before = 0;  ///< Heap::resident_bytes() when it started
  std::uint64_t resident_after = 0;
  std::uint64_t released_bytes = 0;   ///< memory given back
  int classes_moved = 0;              ///< classes gathered toward the heap's start
  /// The compactions it ran, one per class (packing, then gathering): objects moved as by
  /// defragment(), so pointers to them kept outside the heap need refreshing.
  std::vector<DefragResult> runs;

  /// Objects moved by all its runs.
  std::uint64_t objects_moved() const {
    std::uint64_t moved = 0;
    for (const DefragResult& run : runs) moved += run.objects_moved;
    return moved;
  }
};

/// @brief Gathers the objects of @p heap toward its start and releases the free memory at its end.
/// @param pack first pack every class into its fewest blocks (skip it right after a compaction)
/// Does nothing for a fixed heap. Synchronizes.
template <class... Classes>
TrimResult trim(Heap<Classes...>& heap, bool pack = true);

// ---- definitions ----------------------------------------------------------------------------------

namespace detail {

/// From a snapshot of the heap: the lowest block at or above which every block in use can move to
/// a free block below it (see the file comment), or @p mapped when nothing above the used blocks
/// could go. Blocks in use whose class is none of the heap's (untyped memory) cannot move.
/// @param[out] classes_above whether class c has a block at or above the cut
template <class Internals>
std::uint64_t trim_cut(const Internals& view, std::uint64_t mapped, std::vector<bool>& classes_above) {
  const std::uint64_t words = (mapped + 63) / 64;
  std::vector<std::uint64_t> used(words), movable(words, 0);
  const BitmapView free_bits = view.free_blocks();
  for (std::uint64_t w = 0; w < words; ++w) {
    const std::uint64_t valid = mapped >= w * 64 + 64 ? ~std::uint64_t{0} : low_bits(static_cast<int>(mapped - w * 64));
    used[w] = ~*free_bits.level0_word(w) & valid;
    for (int c = 0; c < Internals::kClassCount; ++c) movable[w] |= *view.allocated_blocks(c).level0_word(w);
  }
  // The cut lies above the highest block that cannot move; from there up, the first block with
  // enough free blocks below it for the used blocks above (both sides change by one per block).
  std::uint64_t lowest = 0, used_above = 0, free_below = 0;
  for (std::uint64_t w = words; w-- > 0;) {
    const std::uint64_t fixed = used[w] & ~movable[w];
    if (fixed != 0) {
      lowest = w * 64 + static_cast<std::uint64_t>(highest_set_bit(fixed)) + 1;
      break;
    }
  }
  for (std::uint64_t block = 0; block < mapped; ++block) {
    const bool in_use = ((used[block / 64] >> (block % 64)) & 1u) != 0;
    if (block >= lowest) used_above += in_use ? 1 : 0;
    else free_below += in_use ? 0 : 1;
  }
  std::uint64_t cut = lowest;
  for (; cut < mapped && free_below < used_above; ++cut) {
    const bool in_use = ((used[cut / 64] >> (cut % 64)) & 1u) != 0;
    used_above -= in_use ? 1 : 0;
    free_below += in_use ? 0 : 1;
  }
  classes_above.assign(Internals::kClassCount, false);
  for (int c = 0; c < Internals::kClassCount; ++c)
    for (std::uint64_t w = cut / 64; !classes_above[c] && w < words; ++w)
      classes_above[c] = (*view.allocated_blocks(c).level0_word(w) & ~low_bits(static_cast<int>(w == cut / 64 ? cut % 64 : 0))) != 0;
  return cut;
}

/// Packs class C into the fewest blocks (the emptiest give their objects to the fullest), which
/// frees blocks all over the heap for the gathering step to move into.
template <class C, class... Classes>
void pack_class(Heap<Classes...>& heap, TrimResult& result) {
  if constexpr (!C::kAbstract) {
    if (Heap<Classes...>::template capacity<C> < 2) return;
    DefragOptions options;
    options.subclasses = false;
    options.target = DefragTarget::minimum;
    result.runs.push_back(defragment<C>(heap, options));
  }
}

/// Moves the objects of class C in blocks at or above @p cut into the lowest free blocks (trim()).
template <class C, class... Classes>
void gather_class(Heap<Classes...>& heap, std::uint64_t cut, const std::vector<bool>& classes_above, TrimResult& result) {
  if constexpr (!C::kAbstract) {
    if (!classes_above[static_cast<std::size_t>(Heap<Classes...>::template class_id<C>)]) return;
    DefragOptions options;
    options.subclasses = false;
    options.map_fresh_blocks = false;  // the cut leaves free blocks enough below it
    options.first_block = cut;
    result.runs.push_back(defragment<C>(heap, options, order_by_position()));
    ++result.classes_moved;
  }
}

}  // namespace detail

template <class... Classes>
TrimResult trim(Heap<Classes...>& heap, bool pack) {
  TrimResult result;
  result.resident_before = heap.resident_bytes();
  if (heap.growable()) {
    if (pack) (detail::pack_class<Classes>(heap, result), ...);
    std::vector<bool> classes_above;
    const std::uint64_t cut = detail::trim_cut(detail::InternalsAccess::take_snapshot(heap, false).view,
                                               heap.mapped_block_count(), classes_above);
    (detail::gather_class<Classes>(heap, cut, classes_above, result), ...);
    result.released_bytes = heap.release_free_memory();
  }
  result.resident_after = heap.resident_bytes();
  return result;
}

}  // namespace soaheap
