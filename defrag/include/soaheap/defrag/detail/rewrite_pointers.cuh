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
  /// The new bits of @p pointer (an object of the compacted class), or @p pointer if it did not move.
  SOAHEAP_HD std::uint64_t relocate(std::uint64_t pointer) const {
    const std::uint64_t block = view.block_of(pointer);
    return is_source(block) ? lookup(plan, pointer, block) : pointer;
  }

 private:
  /// Nothing writes the candidate bitmap while the rewrite runs, so it is read through the
  /// read-only cache instead of with the atomic (L1-bypassing) loads the allocator needs.
  SOAHEAP_HD bool is_source(std::uint64_t block) const {
    if (block >= plan.first_target) return false;
    return read_only_bit(view.defrag_candidates(plan.class_index).words(), block);
  }
};

/// Relocates each pointer of @p pointers that names an object of class @p moved_class (null and
/// other classes' pointers pass through unchanged) into @p moved. Relocations that can keep the
/// loads of several pointers in flight at once overload this (PlanRelocation).
template <class Relocation, int N>
SOAHEAP_HD void relocate_batch(const Relocation& relocation, int moved_class, const std::uint64_t (&pointers)[N],
                               std::uint64_t (&moved)[N]) {
  for (int i = 0; i < N; ++i) {
    const std::uint64_t pointer = pointers[i];
    const bool ours = pointer != 0 && class_id_of(pointer) == moved_class;
    moved[i] = ours ? relocation.relocate(pointer) : pointer;
  }
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
      relocate_batch(relocation, kMovedClass, values, moved);
      for (int k = 0; k < kSlotsPerThread; ++k) {
        for (int e = 0; e < kExtent; ++e)
          if (moved[k * kExtent + e] != values[k * kExtent + e]) fields[k][e] = moved[k * kExtent + e];
      }
    }
  }
};

}  // namespace soaheap::detail
