#pragma once
/// @file slot_reservation.cuh
/// @brief The one reservation core of the heap. A block holds up to 64 slots of one *slot class*
///        — a managed class (one object per slot) or an untyped size class (one chunk per slot) —
///        tracked by the block's 64-bit allocation word. This file finds a block with room,
///        starts a new one, reserves and releases slots, retires emptied blocks, keeps the class's
///        active and defrag-candidate bitmaps in step, confirms out of memory, and hands a whole
///        warp's reservations over (warp_reservation.cuh; DynaSOAr's Alg. 1, 2, 6-9, redone so
///        that no thread ever waits for another). Typed objects (heap_internals.cuh) and untyped
///        memory (untyped_memory.cuh) differ only in the SlotClass they pass, and in the current
///        region (current_region.cuh) that untyped size classes hand out before the core is asked.
///
/// Functions take the heap's internals as `Heap`: its `headers`, `free_blocks()`, `bitmap_shape`,
/// `state`, `count_block_taken(blocks)`, `count_block_freed(blocks)` and `release_slots(block,
/// slots)` (a release in a block of whatever class its header names now, for rollbacks).
///
/// A slot class may keep its slots in *spans* of several contiguous blocks (untyped size classes
/// whose chunks are larger than a block's share): the span's first block is the class's block in
/// every respect (header, allocation word, bitmaps); the others are taken and returned with it and
/// say in their headers which block they belong to.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/detail/block_runs.cuh>
#include <soaheap/core/detail/heap_growth.cuh>
#include <soaheap/core/detail/current_region.cuh>
#include <soaheap/core/detail/runtime_state.cuh>
#include <soaheap/core/detail/slot_class.cuh>
#include <soaheap/core/heap_layout.cuh>
#include <soaheap/core/untyped_layout.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Lookups in active blocks before taking a free block (DynaSOAr's r = 5).
inline constexpr int kActiveLookupAttempts = 5;
/// Bound on allocation rounds so that an allocation can never spin forever; each lost round means
/// another thread made progress, so reaching it needs pathological contention.
inline constexpr int kMaxAllocationRounds = 1 << 16;
/// Rounds in which a thread must find neither a free nor an active block before it reports out of
/// memory although some block is still being published by another thread.
inline constexpr int kOutOfMemoryConfirmations = 16;
/// Rounds that must find the heap empty before out of memory stands even with no block in
/// transit: a block's active bit can be off for a moment while a stale refresh settles.
inline constexpr int kOutOfMemoryEmptyChecks = 3;
/// Rounds in which a lane of a diverged warp that is not the first of its warp to allocate leaves
/// starting a new block to that first lane (backing off meanwhile), so that a diverged warp fills
/// one new block rather than one block per lane.
inline constexpr int kFollowerRounds = 6;
/// With HeapOptions::pack_allocations: rounds in which a lane of a diverged warp whose lookups
/// found only blocks that filled up under it looks again (after a pause) instead of starting a new
/// block, so that many lanes filling the same few blocks do not leave new blocks half full
/// (docs/decisions/004-pack-allocations-opt-in.md).
inline constexpr int kPackedContendedRounds = 4;
/// A converged warp lets one lane reserve for all only for slot classes of at least this many
/// slots per block: for one slot per block the leader would start up to 32 blocks one after the
/// other while the other lanes wait (docs/decisions/024-one-reservation-core.md).
inline constexpr int kMinCapacityForWarpHandover = 2;

/// Up to @p wanted set bits of @p free_slots, starting at a seed-dependent position (one slot:
/// picked by @p pick). With @p aim >= 0 (a lane of a diverged warp, wanted = 1): the aim-th free
/// slot, modulo their number, so that lanes of one warp reserving in one block rarely collide.
SOAHEAP_HD inline std::uint64_t choose_slots(std::uint64_t free_slots, int wanted, std::uint32_t seed, int aim = -1,
                                             BitPick pick = BitPick::uniform) {
  if (aim >= 0) return std::uint64_t{1} << nth_set_bit(free_slots, aim % popcount(free_slots));
  if (wanted <= 1) return std::uint64_t{1} << pick_set_bit(free_slots, seed, pick);
  if (popcount(free_slots) <= wanted) return free_slots;
  // Several slots (a warp's reservation): the lowest free ones at or above a seed-dependent slot,
  // then wrapping around, so that warps reserving in one block at once do not all go for the same
  // slots and retry.
  const int start = static_cast<int>(seed % 64u);
  std::uint64_t chosen = 0;
  std::uint64_t remaining = rotate_right(free_slots, start);
  for (int taken = 0; taken < wanted; ++taken) {
    const std::uint64_t lowest = remaining & (~remaining + 1);
    chosen |= lowest;
    remaining ^= lowest;
  }
  return rotate_right(chosen, (64 - start) & 63);
}

// ---- block state --------------------------------------------------------------------------------
/// What @p slot_class's active and candidate bitmaps should say about @p block right now.
SOAHEAP_HD inline void desired_block_state(const BlockHeader* headers, const SlotClass& slot_class,
                                           std::uint64_t block, bool& active, bool& candidate) {
  const std::uint32_t header_id = atomic_load(&headers[block].class_id);
  const std::uint64_t allocation = atomic_load(&headers[block].allocation);
  if (header_id != slot_class.header_id || allocation == kInvalidatedBitmap) {
    active = candidate = false;
    return;
  }
  const int fill = popcount(allocation & slot_class.full_mask());
  active = fill < slot_class.capacity;
  candidate = fill <= slot_class.candidate_threshold;
}

/// @brief Makes the class's active and candidate bits of @p block agree with its fill level.
/// Repeats until the fill level did not change in a way that matters while it wrote, so
/// concurrent callers converge on the state of the last change (no waiting on other threads).
SOAHEAP_HD inline void refresh_block_state(const BlockHeader* headers, const SlotClass& slot_class, std::uint64_t block) {
  bool want_active = false;
  bool want_candidate = false;
  desired_block_state(headers, slot_class, block, want_active, want_candidate);
  for (;;) {
    // Keep defrag ⇒ active ⇒ allocated on the way up and down.
    if (want_active) {
      slot_class.active.set(block);
      if (slot_class.has_candidates()) slot_class.candidates.assign(block, want_candidate);
    } else {
      if (slot_class.has_candidates()) slot_class.candidates.clear(block);
      slot_class.active.clear(block);
    }
    memory_fence();
    bool now_active = false;
    bool now_candidate = false;
    desired_block_state(headers, slot_class, block, now_active, now_candidate);
    if (now_active == want_active && now_candidate == want_candidate) return;
    want_active = now_active;
    want_candidate = now_candidate;
  }
}

/// Starts @p block, just taken from the free bitmap, as a block of @p slot_class with @p slots reserved.
template <class Heap>
SOAHEAP_HD void start_block(const Heap& heap, const SlotClass& slot_class, std::uint64_t block, std::uint64_t slots) {
  // The other blocks of a span keep the invalidated allocation word they had while free (no slot
  // can ever be reserved in them) and name their first block.
  for (std::uint64_t body = block + 1; body < block + static_cast<std::uint64_t>(slot_class.span); ++body) {
    atomic_store(&heap.headers[body].run, static_cast<std::uint32_t>(block));
    atomic_store(&heap.headers[body].class_id, kUntypedSpanBodyId);
  }
  BlockHeader& header = heap.headers[block];
  atomic_store(&header.class_id, slot_class.header_id);
  atomic_store(&header.run, 0u);
  // Threads that still hold this block from an earlier life must see the new class before they
  // can see free slots (DynaSOAr Alg. 8); they then roll their reservation back. Their
  // reservation is an acquire RMW on the allocation word, so release ordering suffices here.
  release_fence();
  atomic_store(&header.allocation, slots);
  release_fence();
  slot_class.allocated.set(block);
  refresh_block_state(heap.headers, slot_class, block);
}

/// Called by whoever emptied @p block: invalidate it (all bits to 1 in one CAS from 0, so no
/// reservation can succeed any more) and return it to the free bitmap. If someone reserved a slot
/// in the meantime the CAS fails and the block lives on.
template <class Heap>
SOAHEAP_HD void try_retire_block(const Heap& heap, const SlotClass& slot_class, std::uint64_t block) {
  if (atomic_cas(&heap.headers[block].allocation, 0, kInvalidatedBitmap) != 0) {
    refresh_block_state(heap.headers, slot_class, block);
    return;
  }
  if (slot_class.has_candidates()) slot_class.candidates.clear(block);
  slot_class.active.clear(block);
  slot_class.allocated.clear(block);
  const auto span = static_cast<std::uint64_t>(slot_class.span);
  for (std::uint64_t body = block + 1; body < block + span; ++body) atomic_store(&heap.headers[body].class_id, kNoClass);
  heap.count_block_freed(span);
  memory_fence();
  if (span == 1) heap.free_blocks().set(block);
  else set_run_bits(heap.free_blocks(), block, span);
}

// ---- reserving --------------------------------------------------------------------------------
/// Reserves up to @p wanted free slots of @p block for @p slot_class; returns them (0: none).
/// @p aim: see choose_slots.
template <class Heap>
SOAHEAP_HD std::uint64_t try_reserve_in_block(const Heap& heap, const SlotClass& slot_class, std::uint64_t block,
                                              int wanted, std::uint32_t seed, int aim = -1) {
  BlockHeader& header = heap.headers[block];
  const std::uint64_t full = slot_class.full_mask();
  for (;;) {
    const std::uint64_t allocation = atomic_load(&header.allocation);
    const std::uint64_t free_slots = ~allocation & full;
    if (free_slots == 0 || allocation == kInvalidatedBitmap) {
      // Full, free, or another class's: the active bit we followed is stale.
      refresh_block_state(heap.headers, slot_class, block);
      return 0;
    }
    const std::uint64_t chosen = choose_slots(free_slots, wanted, seed, aim, slot_class.pick);
    // Acquire: if the block was restarted for another class, the class id below is the new one.
    const std::uint64_t before = atomic_fetch_or_acquire(&header.allocation, chosen);
    const std::uint64_t reserved = chosen & ~before;
    if (reserved == 0) continue;  // others were faster; they made progress
    if (atomic_load(&header.class_id) != slot_class.header_id) {
      // Retired and restarted for another class since we found it (DynaSOAr's rollback case);
      // nothing was constructed yet, so giving the slots back is enough.
      heap.release_slots(block, reserved);
      return 0;
    }
    if (slot_class.state_changes(popcount(before & full), popcount((before | reserved) & full)))
      refresh_block_state(heap.headers, slot_class, block);
    return reserved;
  }
}

/// @brief Called after a round that found the heap empty (no block of the class with room, none
/// free): true once the answer stands; otherwise it backs off, a little longer each time, and the
/// caller tries again. Many starving threads keep blocks_in_transit above zero for each other, so
/// after a few rounds that all found nothing the answer stands anyway (publishing a block takes
/// far less time); the growing pause gives a descheduled publisher (host threads on few cores)
/// the time to finish first.
template <class Heap>
SOAHEAP_HD bool out_of_memory_stands(const Heap& heap, int& empty_rounds) {
  ++empty_rounds;
  if ((empty_rounds >= kOutOfMemoryEmptyChecks && atomic_load(&heap.state->blocks_in_transit) == 0) ||
      empty_rounds >= kOutOfMemoryConfirmations)
    return true;
  back_off(empty_rounds);
  return false;
}

/// A growable heap's free-block search picks the lowest set bit from this bitmap level up and at
/// random below it: a window of 64^3 = 262,144 blocks. A window of 4,096 blocks (level 2) had every
/// thread that starts a block search the same 64 words: on an H200 grown heaps ran game_of_life
/// 1.85x, generation 1.27x, wa_tor 1.07x their fixed heaps' time against 1.43x, 1.17x and 1.00x
/// with this window (1.37x, 1.15x, 0.98x at random, whose trims move more: wa_tor's final trim left
/// 1.21x its allocated blocks resident against 1.15x here and 1.03x with the small window). These
/// figures predate the uniform bit pick (decision 029), which took game_of_life grown to 0.99x a
/// fixed heap of its peak.
inline constexpr int kLowestFirstLevel = 3;

/// Takes a block from the free bitmap, counted in transit until the caller publishes it with
/// end_transit (on failure the transit has ended here). While a block is in transit an
/// empty-looking heap is not yet out of memory.
/// A span of several blocks is a run of free blocks claimed at once; @p no_run tells the caller that
/// no such run exists (rather than a lost race for one).
template <class Heap>
SOAHEAP_HD std::uint64_t take_free_block(const Heap& heap, const SlotClass& slot_class, std::uint32_t seed, bool& no_run) {
  atomic_fetch_add(&heap.state->blocks_in_transit, 1);
  std::uint64_t block = BitmapView::kNotFound;
  no_run = false;
  if (slot_class.span == 1) {
    block = heap.free_blocks().clear_any(seed, heap.state->lowest_first != 0 ? kLowestFirstLevel : BitmapView::kMaxLevelsAny,
                                         slot_class.pick);
  } else {
    const auto span = static_cast<std::uint64_t>(slot_class.span);
    const std::uint64_t first = find_run(heap, span, heap.state->lowest_first != 0 ? 0 : mix_seed(seed) % heap.block_words());
    no_run = first == BitmapView::kNotFound;
    if (!no_run && claim_run(heap, first, span)) block = first;
  }
  if (block == BitmapView::kNotFound) atomic_fetch_add(&heap.state->blocks_in_transit, ~std::uint64_t{0});
  return block;
}
template <class Heap>
SOAHEAP_HD void end_transit(const Heap& heap) {
  atomic_fetch_add(&heap.state->blocks_in_transit, ~std::uint64_t{0});  // -1
}

/// @brief Finds a block of @p slot_class and reserves up to @p wanted slots in it (at least one
/// unless the heap is out of memory). The first lane of a whole warp calls it for the warp; a lane
/// of a diverged warp calls it for itself with @p rank, its position among the lanes of its warp
/// allocating with it (a hint, never needed for correctness): with the warp's @p seed they look at
/// the same blocks, the lane aims at the rank-th free slot, and in the first rounds it leaves
/// starting a new block to rank 0. Host threads pass rank -1 (no hint).
template <class Heap>
SOAHEAP_HD Reservation reserve(const Heap& heap, const SlotClass& slot_class, int wanted, std::uint32_t seed,
                               int rank = -1) {
  const BitmapView& active = slot_class.active;
  int empty_rounds = 0;
  int contended_rounds = 0;
  for (int round = 0; round < kMaxAllocationRounds; ++round) {
    const std::uint32_t round_seed = seed + static_cast<std::uint32_t>(round) * 0x9e3779b9u;
    bool contended = false;  // a lookup found a block, but it had no room left
    for (int lookup = 0; lookup < kActiveLookupAttempts; ++lookup) {
      // Lookups step by an odd constant (a Weyl sequence), so every lookup of a round starts
      // its search somewhere else.
      // Always the uniform pick, whatever the class's BitPick: a rotating lookup reaches only a few
      // of the blocks with room and starts new ones instead (decision 032: the fill until the first
      // failure 95.8 -> 75.5 % with 4 KiB blocks).
      const std::uint64_t block = active.try_find_set(round_seed + static_cast<std::uint32_t>(lookup) * 0x632be5abu);
      if (block == BitmapView::kNotFound) {
        // A miss is often only a summary bit whose word below was just emptied by blocks filling
        // up: look again. Giving up the round here started a new block whenever many threads
        // filled blocks at once (DynaSOAr's traffic: Cell blocks 55% full, out of memory).
        if (active.appears_empty()) break;
        continue;
      }
      const std::uint64_t slots = try_reserve_in_block(heap, slot_class, block, wanted, round_seed + lookup, rank);
      if (slots != 0) return {block, slots, HeapErrorKind::none};
      contended = true;
    }
    if (contended && rank >= 0 && contended_rounds < heap.state->contended_rounds) {
      back_off(contended_rounds++);
      continue;
    }
    // A follower waits for the first lane's new block only if that block can hold it too.
    if (rank > 0 && rank < slot_class.capacity && round < kFollowerRounds) {
      back_off(round);
      continue;
    }
#if !SOAHEAP_DEVICE_CODE
    // A host worker that takes a block can be descheduled before the block shows in the active
    // bitmap; meanwhile every other worker would start a block of its own (under ThreadSanitizer
    // on two cores: blocks 12.5 % full until the heap ran out). Give a block in transit the time
    // to appear first, a few growing pauses, then start one anyway.
    if (round < kFollowerRounds && atomic_load(&heap.state->blocks_in_transit) != 0) {
      back_off(round);
      continue;
    }
#endif
    // Slow path: start a new block of the class.
    bool no_run = false;
    const std::uint64_t block = take_free_block(heap, slot_class, round_seed, no_run);
    if (block != BitmapView::kNotFound) {
      const std::uint64_t slots = low_bits(wanted < slot_class.capacity ? wanted : slot_class.capacity);
      start_block(heap, slot_class, block, slots);
      end_transit(heap);
      heap.count_block_taken(static_cast<std::uint64_t>(slot_class.span));  // after publishing: keeps the in-transit window short
      return {block, slots, HeapErrorKind::none};
    }
    // Out of memory only if no block is on its way to becoming active either (its slots would
    // otherwise be missed by a thread that looked in the short window before it was published).
    // A failed take with free blocks left only lost races to other takers: try again.
    const bool none_free = slot_class.span == 1 ? heap.free_blocks().appears_empty() : no_run;
    if (active.appears_empty() && none_free && out_of_memory_stands(heap, empty_rounds)) {
      // A growable heap asks the host for more blocks and looks again (heap_growth.cuh).
      if (grow_heap(heap, static_cast<std::uint64_t>(slot_class.span))) {
        empty_rounds = 0;
        continue;
      }
      return {0, 0, HeapErrorKind::out_of_memory};
    }
  }
  return {0, 0, HeapErrorKind::allocation_starved};
}

// ---- releasing ---------------------------------------------------------------------------------
/// @brief Frees @p slots of @p block, a block of @p slot_class (destroy, free, and rollback of a
/// reservation). Returns false when some of the slots were not reserved (a double free).
template <class Heap>
SOAHEAP_HD bool release_in_block(const Heap& heap, const SlotClass& slot_class, std::uint64_t block, std::uint64_t slots) {
  const std::uint64_t full = slot_class.full_mask();
  // For 64 slots a full block's word is all ones, like a free block's: only the allocated bitmap
  // tells a double free of a free block apart (racing a legitimate retirement, one may slip
  // through; SOAHEAP_CHECKED checks those against the header too). Looked at only when the word
  // is all ones, so that a rollback in a block being started (allocated bit not yet set) is kept.
  if (full == kInvalidatedBitmap && atomic_load(&heap.headers[block].allocation) == kInvalidatedBitmap &&
      !slot_class.allocated.get(block))
    return false;
  const std::uint64_t before = atomic_fetch_and(&heap.headers[block].allocation, ~slots);
  const std::uint64_t after = before & ~slots;
  if (before == kInvalidatedBitmap && full != kInvalidatedBitmap) {
    // The block is free: a free of a slot whose block was emptied and retired. Put the word back
    // before an allocator can take the cleared bit, and report the double free.
    atomic_cas(&heap.headers[block].allocation, after, kInvalidatedBitmap);
    return false;
  }
  if (after == 0) {
    try_retire_block(heap, slot_class, block);
  } else if (slot_class.state_changes(popcount(before & full), popcount(after & full))) {
    refresh_block_state(heap.headers, slot_class, block);
  }
  return (before & slots) == slots;
}

/// @brief Frees the slots of @p slot_class's current region (word @p region) that were never
/// handed out and leaves the class without a region. Between kernels only: no taker may race it.
template <class Heap>
SOAHEAP_HD void give_back_region(const Heap& heap, const SlotClass& slot_class, std::uint64_t* region) {
  const std::uint64_t before = atomic_exchange(region, 0);
  const std::uint64_t unhanded = unhanded_region_slots(slot_class, before);
  if (unhanded == 0) return;
  const std::uint64_t total = region_shape(slot_class).slots;
  RegionSlots left{(before >> 32) - 1, total - unhanded, static_cast<int>(unhanded)};
  while (left.count != 0) {
    const Reservation piece = left.take_block(slot_class);
    release_in_block(heap, slot_class, piece.block, piece.slots);
  }
}

}  // namespace soaheap::detail
