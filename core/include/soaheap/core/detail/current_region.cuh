#pragma once
/// @file detail/current_region.cuh
/// @brief A slot class's *current region*: a run of blocks started together as blocks of the class
///        with every slot reserved, whose slots are handed out in order by adding to one word.
///        Taking slots from it costs a whole warp one atomic, where the reservation core
///        (slot_reservation.cuh) searches bitmaps and, for each new block, updates the class's
///        bitmaps up to their top levels; it is soaheap::malloc's path while few threads allocate
///        (docs/decisions/028-current-regions-for-malloc.md).
///
/// The region word holds a tag (high 32 bits: 0 no region yet, kCooldownTag the last install found
/// no run of free blocks, otherwise the region's first block + 1) and the slots asked of it (low
/// 32 bits). A taker adds what it wants and gets the slots in [what it read back, the region's
/// slots). The one taker whose addition reaches the state's threshold (0 without a region, the
/// region's slots, kCooldownSlots while cooling down) installs the next region (a lane on its own
/// on the device clears the word instead, and the next taker installs): one successor per state,
/// so there is no lock and no one waits for it, since takers that find nothing meanwhile reserve
/// through the core. Only the threads in flight add to a state whose threshold was
/// crossed, a warp's worth each, until its installer replaces it, so the count never reaches the
/// tag (it would take 2^27 warps' requests during one install).
///
/// A region's slots stay reserved in its blocks' allocation words until handed out, so every other
/// path sees those blocks as full. Handed slots are freed like any others, and a block retires when
/// its last handed slot is freed; slots never handed out stay reserved until give_back_region
/// (between kernels). A region is at most 1 MiB, and a class takes regions only in a heap of
/// kRegionsPerHeap regions or more, so that what they hold back stays a small share of the heap.
/// Their blocks look full to the core, so a thread that the core finds no room for looks at all
/// its class's regions once more before it reports out of memory.
///
/// A class has kRegionShards region words (runtime_state.cuh), and a thread on the device takes
/// from its SM's (region_shard): the words' atomics and the installs are spread over the GPU, and
/// while one region is installed only its shard's warps reserve through the core.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/detail/block_runs.cuh>
#include <soaheap/core/detail/slot_class.cuh>
#include <soaheap/core/untyped_layout.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Tag of a region word whose last install found no run of free blocks.
inline constexpr std::uint32_t kCooldownTag = 0xffffffffu;
/// Slots asked of a cooling-down class before it looks for a run again: a heap without room for
/// a region is not scanned at every allocation.
inline constexpr std::uint64_t kCooldownSlots = std::uint64_t{1} << 16;
/// Slots a region aims at: a burst of 16,384 one-slot requests of the smallest chunks is served
/// by one region.
inline constexpr std::uint64_t kRegionSlots = 16384;
/// Most blocks of a region, and most bytes (of larger blocks): what one shard of a class holds back.
inline constexpr std::uint64_t kMaxRegionBlocks = 256;
inline constexpr std::uint64_t kMaxRegionBytes = std::uint64_t{1} << 20;
/// Words of the free bitmap an install looks through for a run (a fragmented heap is not scanned whole).
inline constexpr std::uint64_t kRegionSearchWords = 256;
/// Runs an install looks for (and tries to claim) before the class cools down.
inline constexpr int kRegionClaimAttempts = 4;
/// A class takes regions only in a heap of at least this many times a region's blocks: its
/// kRegionShards regions hold back at most 0.8 % of the heap.
inline constexpr std::uint64_t kRegionsPerHeap = 1024;

/// SlotClass::region_blocks for the untyped size classes of blocks of @p block_bytes data bytes.
SOAHEAP_HD constexpr int region_blocks_for(std::uint64_t block_bytes) {
  return static_cast<int>(kMaxRegionBytes / block_bytes < kMaxRegionBlocks ? kMaxRegionBytes / block_bytes : kMaxRegionBlocks);
}

/// How a region of a slot class is made up.
struct RegionShape {
  std::uint64_t spans;   ///< spans (blocks of the class) in a region
  std::uint64_t blocks;  ///< blocks in a region
  std::uint64_t slots;   ///< slots in a region
};
SOAHEAP_HD inline RegionShape region_shape(const SlotClass& slot_class) {
  const auto span = static_cast<std::uint64_t>(slot_class.span);
  const auto capacity = static_cast<std::uint64_t>(slot_class.capacity);
  const auto most = static_cast<std::uint64_t>(slot_class.region_blocks);
  std::uint64_t spans = (kRegionSlots + capacity - 1) / capacity;
  if (spans * span > most) spans = most / span;
  return {spans, spans * span, spans * capacity};
}

/// Whether @p slot_class takes regions in @p heap (see the file comment).
template <class Heap>
SOAHEAP_HD bool takes_regions(const Heap& heap, const SlotClass& slot_class) {
  const RegionShape shape = region_shape(slot_class);
  return shape.spans != 0 && heap.block_count >= kRegionsPerHeap * shape.blocks && heap.block_count < kCooldownTag;
}

/// The region word of the calling thread's shard among a class's kRegionShards words at @p words:
/// its SM's on the device, one picked by @p seed on the host (so that host threads use them all).
SOAHEAP_HD inline std::uint64_t* region_shard(std::uint64_t* words, std::uint32_t seed) {
#if SOAHEAP_DEVICE_CODE
  (void)seed;
  unsigned sm = 0;
  asm("mov.u32 %0, %%smid;" : "=r"(sm));
  return words + sm % kRegionShards;
#else
  return words + (seed >> 16) % kRegionShards;
#endif
}

/// Slots of a region that its word @p word says were never handed out.
SOAHEAP_HD inline std::uint64_t unhanded_region_slots(const SlotClass& slot_class, std::uint64_t word) {
  const auto tag = static_cast<std::uint32_t>(word >> 32);
  const std::uint64_t total = region_shape(slot_class).slots;
  const std::uint64_t asked = word & 0xffffffffu;
  return tag == 0 || tag == kCooldownTag || asked >= total ? 0 : total - asked;
}

/// @p count slots of the region that starts at block @p region, from its slot @p first on.
struct RegionSlots {
  std::uint64_t region;
  std::uint64_t first;
  int count;

  /// Takes the first of these slots that lie in one block (of the class's spans) as a reservation,
  /// the form in which the core hands slots to a warp's lanes.
  SOAHEAP_HD Reservation take_block(const SlotClass& slot_class) {
    const auto capacity = static_cast<std::uint64_t>(slot_class.capacity);
    const std::uint64_t slot = first % capacity;
    const std::uint64_t left = capacity - slot;
    const std::uint64_t taken = static_cast<std::uint64_t>(count) < left ? static_cast<std::uint64_t>(count) : left;
    const Reservation reservation{region + first / capacity * static_cast<std::uint64_t>(slot_class.span),
                                  low_bits(static_cast<int>(taken)) << slot, HeapErrorKind::none};
    first += taken;
    count -= static_cast<int>(taken);
    return reservation;
  }
};

/// What one taker got: its slots (count 0: none), and whether it installs the next region.
struct RegionTake {
  RegionSlots slots;
  bool installs;
};

/// Asks the region word @p word of @p slot_class for @p wanted slots (see the file comment).
SOAHEAP_HD inline RegionTake take_from_region(std::uint64_t* word, const SlotClass& slot_class, int wanted) {
  const std::uint64_t total = region_shape(slot_class).slots;
  const std::uint64_t before = atomic_fetch_add(word, static_cast<std::uint64_t>(wanted));
  const auto tag = static_cast<std::uint32_t>(before >> 32);
  const std::uint64_t asked = before & 0xffffffffu;
  const bool region = tag != 0 && tag != kCooldownTag;
  const std::uint64_t threshold = tag == 0 ? 0 : tag == kCooldownTag ? kCooldownSlots : total;
  RegionTake take{{region ? tag - 1 : 0, asked, 0}, asked <= threshold && threshold < asked + static_cast<std::uint64_t>(wanted)};
  if (region && asked < total) take.slots.count = static_cast<int>(total - asked < static_cast<std::uint64_t>(wanted) ? total - asked : wanted);
  return take;
}

// ---- installing a region: run by the one taker that reached the threshold, alone or with the
// lanes of its warp, each step of which is split into parts that run side by side ---------------
/// A run of free blocks for a region of @p slot_class, looked for from a place that depends on
/// @p attempt; kNotFound when the words looked at hold none.
template <class Heap>
SOAHEAP_HD std::uint64_t find_region(const Heap& heap, const SlotClass& slot_class, std::uint32_t seed, int attempt) {
  const std::uint32_t attempt_seed = seed + static_cast<std::uint32_t>(attempt) * 0x9e3779b9u;
  const std::uint64_t start = heap.state->lowest_first != 0 ? 0 : mix_seed(attempt_seed) % heap.block_words();
  return find_run(heap, region_shape(slot_class).blocks, start, kRegionSearchWords);
}

/// Part @p part of @p parts of claiming the region at @p first: the free bits of the run's level-0
/// words part, part + parts, ...; false when one of them was taken already (what this part
/// took is then given back, and the caller gives back the other parts' too).
template <class Heap>
SOAHEAP_HD bool claim_region_part(const Heap& heap, const SlotClass& slot_class, std::uint64_t first, unsigned part,
                                  unsigned parts, bool give_back = false) {
  const std::uint64_t blocks = region_shape(slot_class).blocks;
  const BitmapView free_bits = heap.free_blocks();
  bool claimed = true;
  for (std::uint64_t w = first / 64 + part; w <= (first + blocks - 1) / 64; w += parts) {
    const std::uint64_t mask = run_mask(w, first, blocks);
    if (give_back) {
      free_bits.set_in_word(w, mask);
      continue;
    }
    const std::uint64_t taken = free_bits.clear_in_word(w, mask) & mask;
    if (taken != mask) {
      if (taken != 0) free_bits.set_in_word(w, taken);
      // Words of this part claimed before stay claimed: the caller gives every word back.
      for (std::uint64_t back = first / 64 + part; back < w; back += parts) free_bits.set_in_word(back, run_mask(back, first, blocks));
      claimed = false;
      break;
    }
  }
  return claimed;
}

/// Part @p part of @p parts of starting the claimed region at @p first: its spans part, part +
/// parts, ... become blocks of the class with every slot reserved. As start_block does for one
/// block, a thread that still holds one of them from an earlier life sees the new class before the
/// block's allocation word (and then no free slot in it).
template <class Heap>
SOAHEAP_HD void start_region_part(const Heap& heap, const SlotClass& slot_class, std::uint64_t first, unsigned part,
                                  unsigned parts) {
  const RegionShape shape = region_shape(slot_class);
  const auto span = static_cast<std::uint64_t>(slot_class.span);
  for (std::uint64_t index = part; index < shape.spans; index += parts) {
    const std::uint64_t head = first + index * span;
    for (std::uint64_t body = head + 1; body < head + span; ++body) {
      atomic_store_relaxed(&heap.headers[body].run, static_cast<std::uint32_t>(head));
      atomic_store_relaxed(&heap.headers[body].class_id, kUntypedSpanBodyId);
    }
    atomic_store_relaxed(&heap.headers[head].class_id, slot_class.header_id);
    atomic_store_relaxed(&heap.headers[head].run, 0u);
  }
  release_fence();
  for (std::uint64_t index = part; index < shape.spans; index += parts)
    atomic_store_relaxed(&heap.headers[first + index * span].allocation, slot_class.full_mask());
  release_fence();  // the allocation words before the blocks are marked allocated
}

/// Part @p part of @p parts of marking the started region's blocks allocated to the class.
SOAHEAP_HD inline void mark_region_part(const SlotClass& slot_class, std::uint64_t first, unsigned part, unsigned parts) {
  const RegionShape shape = region_shape(slot_class);
  const auto span = static_cast<std::uint64_t>(slot_class.span);
  if (span == 1) {
    for (std::uint64_t w = first / 64 + part; w <= (first + shape.blocks - 1) / 64; w += parts)
      slot_class.allocated.set_in_word(w, run_mask(w, first, shape.blocks));
  } else {
    for (std::uint64_t index = part; index < shape.spans; index += parts) slot_class.allocated.set(first + index * span);
  }
}

/// The last step, once every part is done: ends the transit that the installer began (an
/// empty-looking heap is not out of memory while a region is being started) and publishes the
/// region at @p first with @p wanted of its slots taken, which it returns; with no region
/// (@p first kNotFound) the word cools down.
template <class Heap>
SOAHEAP_HD RegionSlots publish_region(const Heap& heap, const SlotClass& slot_class, std::uint64_t* word,
                                      std::uint64_t first, int wanted) {
  atomic_fetch_add(&heap.state->blocks_in_transit, ~std::uint64_t{0});
  if (first == BitmapView::kNotFound) {
    atomic_exchange(word, std::uint64_t{kCooldownTag} << 32);
    return {0, 0, 0};
  }
  const RegionShape shape = region_shape(slot_class);
  release_fence();  // every part's stores before the region can be seen
  heap.count_block_taken(shape.blocks);
  const std::uint64_t taken = static_cast<std::uint64_t>(wanted) < shape.slots ? static_cast<std::uint64_t>(wanted) : shape.slots;
  atomic_exchange(word, ((first + 1) << 32) | taken);
  return {first, 0, static_cast<int>(taken)};
}

/// An install by one thread.
template <class Heap>
SOAHEAP_HD RegionSlots install_region(const Heap& heap, const SlotClass& slot_class, std::uint64_t* word, int wanted,
                                      std::uint32_t seed) {
  atomic_fetch_add(&heap.state->blocks_in_transit, 1);
  std::uint64_t first = BitmapView::kNotFound;
  for (int attempt = 0; attempt < kRegionClaimAttempts && first == BitmapView::kNotFound; ++attempt) {
    // A run found can lose a block to a thread that takes free blocks one by one: look again.
    first = find_region(heap, slot_class, seed, attempt);
    if (first != BitmapView::kNotFound && !claim_region_part(heap, slot_class, first, 0, 1)) first = BitmapView::kNotFound;
  }
  if (first != BitmapView::kNotFound) {
    start_region_part(heap, slot_class, first, 0, 1);
    mark_region_part(slot_class, first, 0, 1);
  }
  return publish_region(heap, slot_class, word, first, wanted);
}

#if SOAHEAP_DEVICE_CODE
/// An install by the whole warp, converged at the call, lane 0 the installer: the lanes claim the
/// run's words, start its spans and mark its blocks side by side, so that the bitmaps' hierarchy
/// is climbed for the run's words at once rather than one after the other. Lane 0 gets the slots.
template <class Heap>
__device__ RegionSlots install_region_in_warp(const Heap& heap, const SlotClass& slot_class, std::uint64_t* word,
                                              int wanted, std::uint32_t seed) {
  const auto lane = static_cast<unsigned>(lane_id());
  if (lane == 0) atomic_fetch_add(&heap.state->blocks_in_transit, 1);
  std::uint64_t first = BitmapView::kNotFound;
  for (int attempt = 0; attempt < kRegionClaimAttempts && first == BitmapView::kNotFound; ++attempt) {
    std::uint64_t found = lane == 0 ? find_region(heap, slot_class, seed, attempt) : 0;
    found = __shfl_sync(kFullWarp, found, 0);
    if (found == BitmapView::kNotFound) continue;
    const bool claimed = claim_region_part(heap, slot_class, found, lane, 32);
    if (__all_sync(kFullWarp, claimed)) {
      first = found;
    } else if (claimed) {
      claim_region_part(heap, slot_class, found, lane, 32, true);  // give this lane's words back
    }
  }
  if (first != BitmapView::kNotFound) {
    start_region_part(heap, slot_class, first, lane, 32);
    __syncwarp();
    mark_region_part(slot_class, first, lane, 32);
    __syncwarp();
  }
  RegionSlots slots{0, 0, 0};
  if (lane == 0) slots = publish_region(heap, slot_class, word, first, wanted);
  return slots;
}
#endif

/// One slot from @p slot_class's region word @p word for a thread on its own (a host thread, a
/// lane of a diverged warp); slots == 0: none, the caller reserves through the core. On the host
/// the thread installs the next region when its request crosses the threshold. On the device a
/// lane never installs: the install is the whole warp's (install_region_in_warp), and a second
/// install path would make the allocation path too large for the compiler to inline whole, which
/// costs every allocating kernel registers (decision 008). The lane that crosses the threshold
/// clears the word instead (its request got the region's last slot or none), so the next taker
/// — a whole warp, or a host thread — installs; the takers between got nothing either way.
template <class Heap>
SOAHEAP_HD Reservation take_one_from_region(const Heap& heap, const SlotClass& slot_class, std::uint64_t* word,
                                            std::uint32_t seed) {
  const RegionTake take = take_from_region(word, slot_class, 1);
  RegionSlots slots = take.slots;
#if SOAHEAP_DEVICE_CODE
  (void)heap;
  (void)seed;
  if (take.installs) atomic_exchange(word, std::uint64_t{0});
#else
  // One slot asked: whoever installs got nothing from the state it crossed.
  if (take.installs) slots = install_region(heap, slot_class, word, 1, seed);
#endif
  if (slots.count == 0) return {0, 0, HeapErrorKind::none};
  return slots.take_block(slot_class);
}

/// A thread that the core refused looks at every region of its class (@p words: the class's
/// kRegionShards words, nullptr: none) once more: their slots are what the core cannot see (their
/// blocks look full), and a heap is not out of memory while another SM's region has room.
/// Returns @p refused when none has a slot.
template <class Heap>
SOAHEAP_HD Reservation look_again_at_regions(const Heap& heap, const SlotClass& slot_class, std::uint64_t* words,
                                             std::uint32_t seed, const Reservation& refused) {
  if (words == nullptr) return refused;
  for (std::uint64_t shard = 0; shard < kRegionShards; ++shard) {
    const Reservation again = take_one_from_region(heap, slot_class, words + shard, seed);
    if (again.slots != 0) return again;
  }
  return refused;
}

}  // namespace soaheap::detail
