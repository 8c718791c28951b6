#pragma once
/// @file trim.cuh
/// @brief `soaheap::trim(heap)`: gathers a growable heap's objects toward its start and gives the
///        memory of the free blocks at its end back to the GPU (or the system).
///
/// A growable heap (HeapOptions::max_bytes) takes its lowest free blocks first, so its objects
/// start out near the beginning; when a population falls they leave holes everywhere. trim() first
/// packs every class into its fewest blocks (DefragTarget::minimum), which frees blocks all over the
/// heap, then moves each class whose objects would land lower into the lowest free blocks, in their
/// current order, by ordered compaction (order_by_position(): each object moves once and every
/// pointer to it is rewritten), and last Heap::release_free_memory() unmaps the whole chunks above
/// the last block in use. Untyped memory (soaheap::malloc) never moves, so its blocks stay put.

#include <soaheap/core/heap.cuh>
#include <soaheap/defrag/defragment.cuh>
#include <soaheap/defrag/order.cuh>

#include <algorithm>
#include <cstdint>

namespace soaheap {

/// @brief What trim() did.
struct TrimResult {
  std::uint64_t resident_before = 0;  ///< Heap::resident_bytes() when it started
  std::uint64_t resident_after = 0;
  std::uint64_t released_bytes = 0;   ///< memory given back
  int classes_moved = 0;              ///< classes gathered toward the heap's start
  DefragResult compaction;            ///< the ordered compactions, summed
};

/// @brief Gathers the objects of @p heap toward its start and releases the free memory at its end.
/// @param pack first pack every class into its fewest blocks (skip it right after a compaction)
/// Does nothing for a fixed heap. Synchronizes.
template <class... Classes>
TrimResult trim(Heap<Classes...>& heap, bool pack = true);

// ---- definitions ----------------------------------------------------------------------------------

namespace detail {

/// From a snapshot of the heap's bitmaps: the highest block of class @p class_index plus one, and
/// the position of the @p needed-th lowest free block (the last one an ordered compaction of the
/// class would fill), or the heap's block count when there are not that many.
template <class Internals>
void class_span_and_free_reach(const Internals& view, std::uint64_t mapped, int class_index, std::uint64_t needed,
                               std::uint64_t& class_end, std::uint64_t& free_reach) {
  class_end = 0;
  free_reach = view.block_count;
  std::uint64_t free_seen = 0;
  const BitmapView allocated = view.allocated_blocks(class_index);
  const BitmapView free_bits = view.free_blocks();
  for (std::uint64_t w = 0; w < (mapped + 63) / 64; ++w) {
    const std::uint64_t bits = *allocated.level0_word(w);
    if (bits != 0) class_end = w * 64 + static_cast<std::uint64_t>(highest_set_bit(bits)) + 1;
    const std::uint64_t free_word = *free_bits.level0_word(w);
    const auto count = static_cast<std::uint64_t>(popcount(free_word));
    if (free_reach == view.block_count && needed != 0 && free_seen + count >= needed)
      free_reach = w * 64 + static_cast<std::uint64_t>(nth_set_bit(free_word, static_cast<int>(needed - free_seen - 1))) + 1;
    free_seen += count;
  }
}

inline void add_moves(const DefragResult& moved, TrimResult& result) {
  result.compaction.objects_moved += moved.objects_moved;
  result.compaction.bytes_moved += moved.bytes_moved;
  result.compaction.blocks_freed += moved.blocks_freed;
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
    add_moves(defragment<C>(heap, options), result);
  }
}

/// Gathers class C toward the heap's start when its objects would end lower (trim()).
template <class C, class... Classes>
void gather_class(Heap<Classes...>& heap, TrimResult& result) {
  using HeapType = Heap<Classes...>;
  if constexpr (!C::kAbstract) {
    const HeapStats stats = heap.stats();
    const ClassStats& entry = stats.classes[static_cast<std::size_t>(HeapType::template class_id<C>)];
    if (entry.used_slots == 0) return;
    // Only a class whose objects would end lower than where its highest block is now: moving a
    // class that already sits at the start would only lift it into the holes above it.
    const auto capacity = static_cast<std::uint64_t>(entry.capacity);
    const std::uint64_t needed = (entry.used_slots + capacity - 1) / capacity;
    const auto snapshot = InternalsAccess::take_snapshot(heap, false);
    std::uint64_t class_end = 0, free_reach = 0;
    class_span_and_free_reach(snapshot.view, heap.mapped_block_count(), HeapType::template class_id<C>, needed,
                              class_end, free_reach);
    if (free_reach >= class_end) return;
    DefragOptions options;
    options.subclasses = false;
    add_moves(defragment<C>(heap, options, order_by_position()), result);
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
    (detail::gather_class<Classes>(heap, result), ...);
    result.released_bytes = heap.release_free_memory();
  }
  result.resident_after = heap.resident_bytes();
  return result;
}

}  // namespace soaheap
