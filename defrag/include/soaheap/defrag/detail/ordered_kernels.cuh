#pragma once
/// @file detail/ordered_kernels.cuh
/// @brief The kernels of ordered compaction (detail/ordered_run.cuh runs them in its steps): the
///        run's counters and block flows, its trivially copyable plan, survey, keys, claim, copy,
///        relocation, release and refresh.

#include <soaheap/core/heap.cuh>
#include <soaheap/defrag/detail/compaction_plan.cuh>
#include <soaheap/defrag/detail/copy_objects.cuh>
#include <soaheap/defrag/detail/rewrite_pointers.cuh>
#include <soaheap/defrag/detail/state_update.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Counters of one ordered run, zeroed at its start.
struct OrderCounts {
  std::uint64_t listed;             ///< blocks of the class before (the old blocks)
  std::uint64_t live;               ///< objects of the class
  std::uint64_t free_blocks;        ///< free blocks of the heap before
  std::uint64_t candidates_before;  ///< defrag[C] blocks before
  std::uint64_t candidates_after;   ///< defrag[C] blocks after (among the new blocks)
};

/// A block's flow in the ordered run, one 64-bit word so that its prefix sums are one scan of plain
/// sums (half the bytes of a PlanFlow pair): the block's objects of the class in the low 32 bits, 1
/// in the high 32 bits when the block is free. Prefix sums then hold the objects before a block and
/// the free blocks before it; the objects' sum stays below 2^32 because a class with more objects
/// is refused before any offset is read.
struct OrderFlow {
  static constexpr std::uint64_t kFree = std::uint64_t{1} << 32;
  SOAHEAP_HD static std::uint64_t objects(std::uint64_t word) { return word & 0xffffffffu; }
  SOAHEAP_HD static std::uint64_t free_blocks(std::uint64_t word) { return word >> 32; }
};

/// Trivially copyable description of one ordered run of concrete class C, passed to its kernels.
template <class View>
struct OrderPlan {
  View view;
  OrderCounts* counts;
  std::uint64_t* flows;         ///< [M] OrderFlow words: objects of the class in the block, free or not
  std::uint64_t* offsets;       ///< [M] exclusive prefix sums of flows
  std::uint32_t* old_blocks;    ///< [listed] the class's blocks before the run, in no particular order
  std::uint64_t* old_bits;      ///< [ceil(M/64)] a bit per old block
  std::uint32_t* new_blocks;    ///< [D] the blocks the objects go to, in address order
  void* keys;                   ///< [live] keys by item (address order), before the sort
  void* sources;                ///< [live] source positions by item, before the sort
  const void* sorted_sources;   ///< [live] source positions by rank, after the sort
  bool narrow = false;          ///< the three arrays above hold u32 words, else u64 (see sort_words_fit)
  std::uint32_t* rank_of;       ///< [live] rank of each item
  std::uint64_t live = 0;       ///< L
  std::uint64_t new_block_count = 0;  ///< D = ceil(L/N)
  std::uint64_t first_block = 0;      ///< blocks below it are not the run's (DefragOptions::first_block)
  int class_index = 0;
  int capacity = 1;

  SOAHEAP_HD std::uint64_t full_mask() const { return low_bits(capacity); }
  /// Address-order index of the object in @p slot of old block @p block (its bitmap is untouched
  /// until the state step).
  SOAHEAP_HD std::uint64_t item_of(std::uint64_t block, int slot) const {
    const std::uint64_t allocation = view.headers[block].allocation & full_mask();
    return OrderFlow::objects(offsets[block]) + static_cast<std::uint64_t>(popcount(allocation & low_bits(slot)));
  }
  /// The new pointer bits of the object of rank @p rank.
  SOAHEAP_HD std::uint64_t new_pointer_bits(std::uint64_t rank) const {
    const std::uint64_t capacity64 = static_cast<std::uint64_t>(capacity);
    return view.make_pointer_bits(new_blocks[rank / capacity64], static_cast<int>(rank % capacity64), class_index);
  }
  SOAHEAP_HD bool is_old(std::uint64_t block) const {
    return read_only_bit(old_bits, block);
  }
  /// Records item @p item's key and source position for the sort.
  SOAHEAP_HD void store_item(std::uint64_t item, std::uint64_t key, std::uint64_t source) const {
    if (narrow) {
      static_cast<std::uint32_t*>(keys)[item] = static_cast<std::uint32_t>(key);
      static_cast<std::uint32_t*>(sources)[item] = static_cast<std::uint32_t>(source);
    } else {
      static_cast<std::uint64_t*>(keys)[item] = key;
      static_cast<std::uint64_t*>(sources)[item] = source;
    }
  }
  /// Source position of the object of rank @p rank (after the sort).
  SOAHEAP_HD std::uint64_t sorted_source(std::uint64_t rank) const {
    return narrow ? static_cast<const std::uint32_t*>(sorted_sources)[rank]
                  : static_cast<const std::uint64_t*>(sorted_sources)[rank];
  }
};

/// Whether the sort can run on 32-bit words: keys of at most 32 significant bits, and every source
/// position (block * 64 + slot) below 2^32, i.e. fewer than 2^26 blocks. Each radix pass then moves
/// 8 bytes per object instead of 16.
inline bool sort_words_fit(int key_bits, std::uint64_t blocks) {
  return key_bits <= 32 && blocks <= (std::uint64_t{1} << 26);
}

/// Step 1, one thread per heap block.
template <class View>
struct OrderSurveyKernel {
  OrderPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t block) const {
    const View& view = plan.view;
    OrderCounts& counts = *plan.counts;
    const bool listed = block >= plan.first_block && view.allocated_blocks(plan.class_index).get(block);
    const bool free = view.free_blocks().get(block);
    const std::uint64_t allocation = listed ? atomic_load(&view.headers[block].allocation) & plan.full_mask() : 0;
    const auto objects = static_cast<std::uint64_t>(popcount(allocation));
    plan.flows[block] = objects | (free ? OrderFlow::kFree : 0);
    // Every lane adds (0 when its block does not count) so that whole warps add with one atomic.
    const std::uint64_t position = aggregated_fetch_add(&counts.listed, listed ? 1 : 0);
    aggregated_add(&counts.live, objects);
    aggregated_add(&counts.free_blocks, free ? 1 : 0);
    const bool candidate = listed && view.defrag_candidates(plan.class_index).get(block);
    aggregated_add(&counts.candidates_before, candidate ? 1 : 0);
    if (listed) {
      plan.old_blocks[position] = static_cast<std::uint32_t>(block);
      atomic_fetch_or(&plan.old_bits[block / 64], std::uint64_t{1} << (block % 64));
    }
  }
};

/// Step 2, one thread per slot of the old blocks (N consecutive threads per block).
template <class View, class C, class Order>
struct OrderKeysKernel {
  OrderPlan<View> plan;
  Order order;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    constexpr std::uint64_t kCapacity = View::Layout::template capacity<C>;  // a constant divisor
    const std::uint64_t block = plan.old_blocks[tid / kCapacity];
    const int slot = static_cast<int>(tid % kCapacity);
    const std::uint64_t allocation = plan.view.headers[block].allocation & plan.full_mask();
    if (((allocation >> slot) & 1u) == 0) return;
    const std::uint64_t item =
        OrderFlow::objects(plan.offsets[block]) + static_cast<std::uint64_t>(popcount(allocation & low_bits(slot)));
    plan.store_item(item, order.key(plan.view, plan.view.template make_pointer<C>(block, slot)),
                    block * kSlotsPerBlock + static_cast<std::uint64_t>(slot));
  }
};

/// Step 4, one thread per heap block: the D lowest free blocks become blocks of the class, with
/// their final allocation bitmaps (nothing else runs on the heap during the run). The claimed
/// blocks are runs of neighbours: their bitmap words and the heap's block counter are updated once
/// per warp, so every lane takes part. (A thread per new block finding its block by binary search
/// in the offsets was slower: 22 dependent loads against one streamed word per heap block.)
template <class View>
struct OrderClaimKernel {
  OrderPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t block) const {
    const std::uint64_t index = OrderFlow::free_blocks(plan.offsets[block]);
    const bool claimed = (plan.flows[block] & OrderFlow::kFree) != 0 && index < plan.new_block_count;
    const View& view = plan.view;
    update_block_bit_in_warp(view.free_blocks(), block, claimed, false);
    if (claimed) {
      const std::uint64_t capacity = static_cast<std::uint64_t>(plan.capacity);
      const std::uint64_t fill = index + 1 < plan.new_block_count ? capacity : plan.live - index * capacity;
      BlockHeader& header = view.headers[block];
      atomic_store(&header.class_id, static_cast<std::uint32_t>(plan.class_index));
      atomic_store(&header.run, 0u);
      atomic_store(&header.allocation, low_bits(static_cast<int>(fill)));
      plan.new_blocks[index] = static_cast<std::uint32_t>(block);
    }
    update_block_bit_in_warp(view.allocated_blocks(plan.class_index), block, claimed, true);
    count_blocks_in_warp(view, claimed, true);
  }
};

/// Step 5, one thread per object rank; Field: the in-place forwarding field of C, or -1.
template <class View, class C, int Field>
struct OrderCopyKernel {
  OrderPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t rank) const {
    const std::uint64_t source = plan.sorted_source(rank);
    const std::uint64_t from_block = source / kSlotsPerBlock;
    const int from_slot = static_cast<int>(source % kSlotsPerBlock);
    constexpr std::uint64_t kCapacity = View::Layout::template capacity<C>;  // a constant divisor
    const std::uint64_t to_block = plan.new_blocks[rank / kCapacity];
    const int to_slot = static_cast<int>(rank % kCapacity);
    ObjectCopy<View, C>::copy(plan.view.data_address(from_block), from_slot, plan.view.data_address(to_block), to_slot);
    if constexpr (Field >= 0) {
      *in_place_forwarding_pointer<View, C, Field>(plan.view, from_block, from_slot) =
          plan.view.make_pointer_bits(to_block, to_slot, plan.class_index);
    } else {
      plan.rank_of[plan.item_of(from_block, from_slot)] = static_cast<std::uint32_t>(rank);
    }
  }
};

/// Where the ordered run moved an object of C (step 6); Field as for OrderCopyKernel.
template <class View, class C, int Field>
struct OrderRelocation {
  OrderPlan<View> plan;
  /// The rewrite scans the class's new blocks only: the old ones hold the objects' stale copies.
  SOAHEAP_HD bool holder_block_moved_away(std::uint64_t) const { return false; }
  /// Not 0 for the old blocks (a pointer to another block is not an object of the class: it is
  /// left to validate()).
  SOAHEAP_HD unsigned moved_state(std::uint64_t block) const { return plan.is_old(block) ? 1u : 0u; }
  SOAHEAP_HD std::uint64_t moved_to(std::uint64_t pointer, std::uint64_t block, unsigned) const {
    if constexpr (Field >= 0) {
      return *in_place_forwarding_pointer<View, C, Field>(plan.view, block, slot_of(pointer));
    } else {
      return plan.new_pointer_bits(plan.rank_of[plan.item_of(block, slot_of(pointer))]);
    }
  }
};

/// Step 7a, one thread per old block (neighbouring entries of the list are mostly neighbouring
/// blocks: their bitmap words are updated once per warp).
template <class View>
struct OrderReleaseKernel {
  OrderPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    release_emptied_block_in_warp(plan.view, plan.old_blocks[index], plan.class_index);
  }
};

/// Step 7b, one thread per new block: active/defrag from the fill level, and the candidates after.
template <class View>
struct OrderRefreshKernel {
  OrderPlan<View> plan;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint64_t block = plan.new_blocks[index];
    plan.view.refresh_block_state(block, plan.class_index);
    const bool candidate = plan.view.defrag_candidates(plan.class_index).get(block);
    aggregated_add(&plan.counts->candidates_after, candidate ? 1 : 0);
  }
};

}  // namespace soaheap::detail
