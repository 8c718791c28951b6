#pragma once
/// @file detail/warp_reservation.cuh
/// @brief A warp's reservations and releases through the reservation core (slot_reservation.cuh):
///        a converged whole warp is served by one lane and the reservations are handed over to the
///        others, every other lane reserves its own slot; a converged warp frees with one atomic
///        per block. The one place that hands reservations between lanes (the ghost-object rule,
///        stated at reserve_for_whole_warp), for objects and untyped chunks alike, with the slots
///        of an untyped class's current region (current_region.cuh) taken first.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/detail/current_region.cuh>
#include <soaheap/core/detail/slot_class.cuh>
#include <soaheap/core/detail/slot_reservation.cuh>

#include <cstdint>

namespace soaheap::detail {

#if SOAHEAP_DEVICE_CODE
/// One lane's outcome: the slot it got (slot < 0: none) and, if it wanted one and got none, why.
struct LaneSlot {
  std::uint64_t block;
  int slot;
  HeapErrorKind failure;
};

/// The seed the lanes of one warp share: they look at the same blocks.
__device__ inline std::uint32_t warp_seed(std::uint64_t salt) {
  const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  return mix_seed((thread / 32) ^ salt);
}

/// @brief The whole warp, converged at the call, reserves one slot for each lane in @p wanting (the
/// same mask in every lane): lane 0 reserves them, block by block, and shuffles each round's
/// reservation to the others.
///
/// Invariant (ghost objects; docs/decisions/001-warp-aggregation-whole-warp-only.md): a
/// reservation made by one lane for others is handed over only within a group that no other lane
/// of the warp can join while the handover runs, and the only such group is the whole warp
/// converged at the call. A smaller
/// group (the lanes that reach `new` in one branch, or at one moment) is not safe: the compiler may
/// lower the group's shuffles as if the lane mask were the same for every lane that executes them
/// (ptxas does so for an out-of-line `operator new`, seen on an H100 with CUDA 13). When two groups
/// of one warp then reconverge in that code, a follower of one group reads the registers of a
/// leader that is not there: its allocation returns nullptr with no error recorded, while the slot
/// reserved for it stays allocated with no owner. reserve_in_warp is the one caller, and calls it
/// only for a converged whole warp; every other lane reserves its own slot (reserve_for_lane).
/// @p kRegions: the class may have a current @p region (untyped memory). Objects compile without
/// the region code: inlined into a method, its size made the compiler call the allocation path
/// out of line (generation's allocating kernels: 64 → 120 registers and a 424-byte stack frame,
/// 2.8× the time on an H200; decision 008).
template <bool kRegions, class Heap>
__device__ LaneSlot reserve_for_whole_warp(const Heap& heap, const SlotClass& slot_class, unsigned wanting,
                                           std::uint32_t seed, std::uint64_t* region = nullptr) {
  LaneSlot mine{0, -1, HeapErrorKind::none};
  const int count = popcount(wanting);
  const int lane = lane_id();
  const bool wants = ((wanting >> lane) & 1u) != 0;
  const int index = popcount(wanting & lanes_below());  // among the lanes that want one
  // Lane 0's slots from its SM's current region of the class (current_region.cuh; @p region: the
  // class's region words): what the region had left,
  // then what a region it installs gives; handed over block by block before the core is asked.
  [[maybe_unused]] RegionSlots from_region{0, 0, 0};
  [[maybe_unused]] RegionSlots installed{0, 0, 0};
  if constexpr (kRegions) {
    if (region != nullptr) {
      std::uint64_t* const word = region_shard(region, seed);
      bool installs = false;
      if (lane == 0) {
        const RegionTake take = take_from_region(word, slot_class, count);
        from_region = take.slots;
        installs = take.installs;
      }
      if (__shfl_sync(kFullWarp, installs, 0))
        installed = install_region_in_warp(heap, slot_class, word, count - from_region.count, seed);
    }
  }
  // A class of one slot per block leaves the rest to the lanes (kMinCapacityForWarpHandover).
  [[maybe_unused]] const bool core_serves_warp = slot_class.capacity >= kMinCapacityForWarpHandover;
  int served = 0;
  while (served < count) {
    Reservation reservation{0, 0, HeapErrorKind::none};
    if (lane == 0) {
      if constexpr (kRegions) {
        if (from_region.count == 0) {
          from_region = installed;
          installed.count = 0;
        }
        if (from_region.count != 0) reservation = from_region.take_block(slot_class);
        else if (core_serves_warp) reservation = reserve(heap, slot_class, count - served, seed);
      } else {
        reservation = reserve(heap, slot_class, count - served, seed);
      }
    }
    const std::uint64_t block = __shfl_sync(kFullWarp, reservation.block, 0);
    const std::uint64_t slots = __shfl_sync(kFullWarp, reservation.slots, 0);
    if (slots == 0) {  // the remaining lanes get nothing (failure none: they reserve their own)
      const auto failure = static_cast<HeapErrorKind>(__shfl_sync(kFullWarp, static_cast<unsigned>(reservation.failure), 0));
      if (wants && index >= served) mine.failure = failure;
      break;
    }
    const int granted = popcount(slots);
    if (wants && index >= served && index < served + granted) {
      mine.block = block;
      mine.slot = nth_set_bit(slots, index - served);
    }
    served += granted;
    seed = mix_seed(seed + 1);
  }
  return mine;
}

/// A lane outside a converged whole warp reserves its own slot (from the class's current @p region
/// first, where it has one); the lanes at the call (@p lanes) share the warp's seed and aim apart
/// by their rank among them (hints only: a wrong one costs a retry, never a slot), so that a
/// diverged warp's slots land side by side.
template <bool kRegions = false, class Heap>
__device__ LaneSlot reserve_for_lane(const Heap& heap, const SlotClass& slot_class, unsigned lanes, std::uint64_t salt,
                                     std::uint64_t* region = nullptr) {
  const int rank = popcount(lanes & lanes_below());
  const std::uint32_t seed = warp_seed((std::uint64_t{lanes} << 32) ^ salt);
  Reservation reservation{0, 0, HeapErrorKind::none};
  if constexpr (kRegions) {
    if (region != nullptr)
      reservation = take_one_from_region(heap, slot_class, region_shard(region, seed), seed + static_cast<std::uint32_t>(rank));
  }
  if (reservation.slots == 0) reservation = reserve(heap, slot_class, 1, seed, rank);
  if constexpr (kRegions) {
    if (reservation.slots == 0) reservation = look_again_at_regions(heap, slot_class, region, seed + 1, reservation);
  }
  if (reservation.slots == 0) return {0, -1, reservation.failure};
  return {reservation.block, lowest_set_bit(reservation.slots), HeapErrorKind::none};
}

/// @brief Every lane of the warp calls it together, @p wanted in the lanes that want a slot: a
/// converged whole warp is served by one lane (reserve_for_whole_warp) when a block holds enough
/// of its slots or the class has a current @p region; otherwise each wanting lane reserves its own.
/// @p kRegions as for reserve_for_whole_warp.
template <bool kRegions = false, class Heap>
__device__ LaneSlot reserve_in_warp(const Heap& heap, const SlotClass& slot_class, bool wanted, std::uint64_t salt,
                                    std::uint64_t* region = nullptr) {
  if (whole_warp_converged() && (slot_class.capacity >= kMinCapacityForWarpHandover || (kRegions && region != nullptr))) {
    const unsigned wanting = __ballot_sync(kFullWarp, wanted);
    if (wanting == 0) return {0, -1, HeapErrorKind::none};
    const LaneSlot mine = reserve_for_whole_warp<kRegions>(
        heap, slot_class, wanting, warp_seed((static_cast<std::uint64_t>(clock64()) << 20) ^ salt), region);
    if constexpr (kRegions) {
      if (!wanted || mine.slot >= 0) return mine;
      // Left over by the region of a one-slot class: on their own through the core, and where it
      // refuses them, through every region of the class (the other shards' may have room while
      // the core has no block left: they hold the blocks).
      const LaneSlot own = mine.failure == HeapErrorKind::none ? reserve_for_lane(heap, slot_class, __activemask(), salt) : mine;
      if (own.slot >= 0) return own;
      const Reservation last = look_again_at_regions(heap, slot_class, region, static_cast<std::uint32_t>(salt) + lane_id(),
                                                     {0, 0, own.failure});
      return last.slots != 0 ? LaneSlot{last.block, lowest_set_bit(last.slots), HeapErrorKind::none} : own;
    }
    return mine;
  }
  if (!wanted) return {0, -1, HeapErrorKind::none};
  return reserve_for_lane<kRegions>(heap, slot_class, __activemask(), salt, region);
}

/// @brief The whole warp, converged at the call, frees one slot per lane (@p block kNotFound: none
/// in this lane): the lanes freeing in one block combine their slots and the lowest of them
/// releases them with one atomic. Returns false in the lanes of a group in which some slot was
/// not reserved or was freed twice (a double free somewhere in the group).
template <class Heap>
__device__ bool release_for_whole_warp(const Heap& heap, const SlotClass& slot_class, std::uint64_t block, int slot) {
  const unsigned group = __match_any_sync(kFullWarp, block);
  if (block == BitmapView::kNotFound) return true;
  const std::uint64_t mask = std::uint64_t{1} << slot;
  const auto low = static_cast<unsigned>(mask);
  const auto high = static_cast<unsigned>(mask >> 32);
  const std::uint64_t slots = (std::uint64_t{__reduce_or_sync(group, high)} << 32) | __reduce_or_sync(group, low);
  const int leader = __ffs(group) - 1;
  bool released = true;
  if (lane_id() == leader) released = release_in_block(heap, slot_class, block, slots);
  released = __shfl_sync(group, released, leader);
  return released && popcount(slots) == popcount(group);  // fewer slots than lanes: freed twice
}
#endif

}  // namespace soaheap::detail
