#pragma once
/// @file detail/rewrite_pointers.cuh
/// @brief Pass step 3 (paper Alg. 3 and §3.4): rewrite every pointer to a moved object. Only the
///        (class, field) pairs that reflection says can hold a pointer to the compacted class are
///        scanned; a Relocation says whether a pointer's object moved and where to (for passes:
///        its block is a candidate below R[B], i.e. a source; for the plan: see compaction_plan.cuh).

#include <soaheap/core/detail/kernels.cuh>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/forwarding.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>
#include <soaheap/reflection/class_traits.cuh>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace soaheap::detail {

template <class C, class FieldList>
struct any_field_can_point_to;
template <class C, class... Fields>
struct any_field_can_point_to<C, type_list<Fields...>>
    : std::bool_constant<(field_can_point_to_v<Fields, C> || ...)> {};

/// @brief True when some field of U (inherited ones included) can hold a pointer to a C.
template <class U, class C>
inline constexpr bool can_hold_pointer_to_v = any_field_can_point_to<C, all_field_types_t<U>>::value;

/// New location of a moved object, read from the forwarding pointer left in its source block.
template <class View>
struct ForwardingPointerLookup {
  View view;
  SOAHEAP_HD std::uint64_t operator()(const PassPlan&, std::uint64_t pointer, std::uint64_t block) const {
    return forwarding_pointers(view, block)[slot_of(pointer)];
  }
};

/// New location of a moved object, recomputed from the pass plan (paper §3.8, "records"): the
/// source's index by binary search in the sorted R[0..B), the object's rank in the source's frozen
/// bitmap, then the same destination rule the copy used. No read of the source block at all.
template <class View>
struct RecordLookup {
  View view;
  SOAHEAP_HD std::uint64_t operator()(const PassPlan& plan, std::uint64_t pointer, std::uint64_t block) const {
    const std::int64_t source = plan.source_index_of(block);
    if (source < 0) return pointer;  // unreachable: the caller checked that block is a source
    const int slot = slot_of(pointer);
    const int rank = popcount(plan.source_bitmaps[source] & low_bits(slot));
    const Destination destination = plan.destination_of(static_cast<std::uint64_t>(source), rank);
    if (destination.block == Destination::kNoDestination) return pointer;
    return view.make_pointer_bits(destination.block, destination.slot, plan.class_index);
  }
};

/// Relocation of the pass-by-pass strategy: objects of sources moved, found through @p Lookup.
template <class View, class Lookup>
struct PassRelocation {
  View view;
  PassPlan plan;
  Lookup lookup;

  /// Source blocks hold forwarding pointers now; their objects live on (already copied) in targets.
  SOAHEAP_HD bool holder_block_moved_away(std::uint64_t block) const { return is_source(block); }
  /// Not 0 when objects of @p block moved.
  SOAHEAP_HD unsigned moved_state(std::uint64_t block) const { return is_source(block) ? 1u : 0u; }
  /// The new bits of @p pointer (an object of the compacted class in @p block).
  SOAHEAP_HD std::uint64_t moved_to(std::uint64_t pointer, std::uint64_t block, unsigned) const {
    return lookup(plan, pointer, block);
  }

 private:
  /// Nothing writes the candidate bitmap while the rewrite runs, so it is read through the
  /// read-only cache instead of with the atomic (L1-bypassing) loads the allocator needs.
  SOAHEAP_HD bool is_source(std::uint64_t block) const {
    if (block >= plan.first_target) return false;
    return read_only_bit(view.defrag_candidates(plan.class_index), block);
  }
};

/// The new bits of each pointer of @p pointers that names an object of class @p moved_class (null
/// and other classes' pointers pass through unchanged), in two rounds so that the loads of all N are
/// in flight together: first relocation.moved_state(block) of every pointer (bits read through the
/// cache; block 0 stands in for the other pointers, so these loads need no branch), then
/// relocation.moved_to(pointer, block, state) where the state is not 0 (the new place, or the
/// pointer itself for an object that stayed). One pointer after the other, each would wait for its
/// loads before the next pointer's first load is issued.
template <class View, class Relocation, int N>
SOAHEAP_HD void relocate_batch(const View& view, const Relocation& relocation, int moved_class,
                               const std::uint64_t (&pointers)[N], std::uint64_t (&moved)[N]) {
  std::uint64_t blocks[N];
  unsigned states[N];
  for (int i = 0; i < N; ++i) {
    const bool ours = pointers[i] != 0 && class_id_of(pointers[i]) == moved_class;
    blocks[i] = ours ? view.block_of(pointers[i]) : 0;
    states[i] = relocation.moved_state(blocks[i]) & (ours ? ~0u : 0u);
  }
  for (int i = 0; i < N; ++i) moved[i] = states[i] != 0 ? relocation.moved_to(pointers[i], blocks[i], states[i]) : pointers[i];
}

/// kSlotsPerThread slots of one allocated block of U per thread: thread `lane` of a block takes slots
/// lane, lane + T, lane + 2T, ... (T threads per block), so each load instruction of a warp reads
/// consecutive slots of a field's SOA array (coalesced), and a thread has several independent
/// pointer loads in flight instead of one dependent chain of loads (the kernel is latency-bound
/// otherwise). Rewrites the fields of U that can point to a C.
template <class View, class U, class C, class Relocation>
struct RewritePointersKernel {
  using FieldList = all_field_types_t<U>;
  static constexpr int kCapacity = View::Layout::template capacity<U>;
  static constexpr int kSlotsPerThread = kCapacity >= 4 ? 4 : kCapacity;
  static constexpr int kThreadsPerBlock = (kCapacity + kSlotsPerThread - 1) / kSlotsPerThread;
  static constexpr int kHolderClass = View::template class_id<U>;
  static constexpr int kMovedClass = View::template class_id<C>;
  View view;
  const std::uint32_t* blocks;  ///< allocated blocks of U
  Relocation relocation;

  /// Threads to launch for @p block_count blocks of U.
  static std::uint64_t thread_count(std::uint64_t block_count) {
    return block_count * static_cast<std::uint64_t>(kThreadsPerBlock);
  }

  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t block = blocks[tid / kThreadsPerBlock];
    const int lane = static_cast<int>(tid % kThreadsPerBlock);
    if (kHolderClass == kMovedClass && relocation.holder_block_moved_away(block)) return;
    const std::uint64_t objects = view.headers[block].allocation;
    rewrite_fields(view.data_address(block), lane, objects, std::make_integer_sequence<int, FieldList::size>{});
  }

 private:
  template <int... Fields>
  SOAHEAP_HD void rewrite_fields(std::uint64_t data, int lane, std::uint64_t objects,
                                 std::integer_sequence<int, Fields...>) const {
    (rewrite_field<Fields>(data, lane, objects), ...);
  }

  template <int Field>
  SOAHEAP_HD void rewrite_field(std::uint64_t data, int lane, std::uint64_t objects) const {
    using FieldType = type_at_t<FieldList, Field>;
    if constexpr (field_can_point_to_v<FieldType, C>) {
      constexpr std::uint64_t kOffset = soa_array_offset<FieldList, Field>(kCapacity);
      constexpr int kExtent = pointer_field_extent_v<FieldType>;
      constexpr int kValues = kSlotsPerThread * kExtent;
      std::uint64_t* fields[kSlotsPerThread];
      std::uint64_t values[kValues];
      // All loads first: they are independent of each other.
      for (int k = 0; k < kSlotsPerThread; ++k) {
        const int slot = lane + k * kThreadsPerBlock;
        const bool live = slot < kCapacity && ((objects >> slot) & 1u) != 0;
        fields[k] = live ? reinterpret_cast<std::uint64_t*>(data + kOffset + slot * sizeof(FieldType)) : nullptr;
        for (int e = 0; e < kExtent; ++e) values[k * kExtent + e] = live ? fields[k][e] : 0;
      }
      // Then every relocation before the first store: a store might alias the loads of a later
      // relocation (forwarding pointers, headers), so stores in between would serialise them.
      std::uint64_t moved[kValues];
      relocate_batch(view, relocation, kMovedClass, values, moved);
      for (int k = 0; k < kSlotsPerThread; ++k) {
        for (int e = 0; e < kExtent; ++e)
          if (moved[k * kExtent + e] != values[k * kExtent + e]) fields[k][e] = moved[k * kExtent + e];
      }
    }
  }
};

}  // namespace soaheap::detail
