#pragma once
/// @file detail/slot_class.cuh
/// @brief What the reservation core (slot_reservation.cuh) and a class's current region
///        (current_region.cuh) need to know of a kind of slots: its header id, capacity, bitmaps
///        and span.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/detail/runtime_state.cuh>

#include <cstdint>

namespace soaheap::detail {

/// What differs between kinds of slots; everything else in the reservation core is written once.
struct SlotClass {
  std::uint32_t header_id;  ///< class id in the headers of the class's blocks
  int capacity;             ///< slots per block, 1..64
  /// A block with at most this many slots in use is a defrag candidate; -1: the class has none.
  int candidate_threshold;
  BitmapView allocated;     ///< the class's blocks
  BitmapView active;        ///< its blocks with a free slot
  BitmapView candidates;    ///< its defrag candidates (unused when candidate_threshold < 0)
  int span = 1;             ///< contiguous blocks per block of the class (slot_reservation.cuh)
  int region_blocks = 0;    ///< most blocks of the class's current regions; 0: it takes none (current_region.cuh)
  /// How it picks a free block to start and a single slot in a block (decision 032).
  BitPick pick = BitPick::uniform;

  SOAHEAP_HD std::uint64_t full_mask() const { return low_bits(capacity); }
  SOAHEAP_HD bool has_candidates() const { return candidate_threshold >= 0; }
  /// Whether a block going from @p fill_before to @p fill_after used slots changes its active or
  /// candidate state (its bitmaps then need a refresh).
  SOAHEAP_HD bool state_changes(int fill_before, int fill_after) const {
    const bool full_before = fill_before == capacity;
    const bool full_after = fill_after == capacity;
    const bool candidate_before = fill_before <= candidate_threshold;
    const bool candidate_after = fill_after <= candidate_threshold;
    return full_before != full_after || candidate_before != candidate_after;
  }
};

/// Result of a reservation: the block and the slots reserved in it; slots == 0: failed, for the
/// reason in `failure` (out_of_memory or allocation_starved), which the caller records.
struct Reservation {
  std::uint64_t block;
  std::uint64_t slots;
  HeapErrorKind failure;
};

}  // namespace soaheap::detail
