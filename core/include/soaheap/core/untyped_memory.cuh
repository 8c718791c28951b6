#pragma once
/// @file untyped_memory.cuh
/// @brief `soaheap::malloc` / `soaheap::free`: untyped memory of any size in the same heap as the
///        managed objects (the low layer of the KMA thesis's two-layer design).
///
/// Requests up to one block are rounded to a size class (untyped_layout.cuh); a block of untyped
/// memory holds chunks of one class, found through the class's own allocated/active bitmaps and
/// reserved in the block's 64-bit allocation bitmap exactly as object slots are: warp-aggregated,
/// lock-free, retired to the free bitmap when the last chunk goes. Larger requests take a run of
/// contiguous free blocks, found by scanning the free bitmap a word at a time and claimed word by
/// word (rolled back when another thread took a block first); their data segments are contiguous
/// because block headers live in a table of their own.
///
/// Untyped blocks carry header class ids that no managed class has, and bitmaps of their own, so
/// enumeration, statistics of classes and defragmentation (which read only managed classes'
/// bitmaps) never see, move or change them.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/base/portability.cuh>
#include <soaheap/core/thread_pool.hpp>
#include <soaheap/core/untyped_layout.cuh>
#include <soaheap/core/untyped_stats.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace soaheap {
namespace detail {

/// Class field of recorded untyped errors (no managed class has it).
inline constexpr int kUntypedErrorClass = 0xfe;
/// Largest value the 48-bit block field of a recorded error can carry (sizes beyond it are clamped).
inline constexpr std::uint64_t kMaxErrorPayload = (std::uint64_t{1} << 48) - 1;

/// Index of the highest set bit of @p value (which must not be 0).
SOAHEAP_HD inline int highest_set_bit(std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  return 63 - __clzll(static_cast<long long>(value));
#else
  return 63 - __builtin_clzll(value);
#endif
}

/// Number of leading (most significant) one bits of @p value.
SOAHEAP_HD inline int leading_ones(std::uint64_t value) {
  return value == ~std::uint64_t{0} ? 64 : 63 - highest_set_bit(~value);
}

/// Bit i of the result is set when bits i .. i+length-1 of @p value are all set (1 <= length <= 64).
SOAHEAP_HD inline std::uint64_t run_starts(std::uint64_t value, int length) {
  int covered = 1;
  while (covered * 2 <= length) {
    value &= value >> covered;
    covered *= 2;
  }
  if (covered < length) value &= value >> (length - covered);
  return value;
}

/// The untyped-memory algorithms over a HeapView (any heap's).
template <class View>
struct Untyped {
  using Layout = typename View::Untyped;
  static constexpr std::uint64_t kBlockBytes = Layout::kBlockBytes;

  // ---- bitmaps -------------------------------------------------------------------------------------
  SOAHEAP_HD static BitmapView allocated(const View& view, int size_class) {
    return view.bitmap(View::kUntypedBitmapBase + 2 * size_class);
  }
  SOAHEAP_HD static BitmapView active(const View& view, int size_class) {
    return view.bitmap(View::kUntypedBitmapBase + 2 * size_class + 1);
  }
  /// Every block that belongs to a run.
  SOAHEAP_HD static BitmapView run_blocks(const View& view) {
    return view.bitmap(View::kUntypedBitmapBase + 2 * Layout::kClassCount);
  }

  SOAHEAP_HD static void record(const View& view, HeapErrorKind kind, std::uint64_t payload) {
    view.record_error(kind, kUntypedErrorClass, payload < kMaxErrorPayload ? payload : kMaxErrorPayload);
  }

  // ---- blocks of chunks -------------------------------------------------------------------------
  /// Makes active[k] agree with the block's fill level, repeating while the fill level changes
  /// under it (the same convergence argument as for object blocks; never waits for anyone).
  SOAHEAP_HD static void refresh(const View& view, std::uint64_t block, int size_class) {
    const BitmapView active_bits = active(view, size_class);
    bool want = has_free_chunk(view, block, size_class);
    for (;;) {
      active_bits.assign(block, want);
      memory_fence();
      const bool now = has_free_chunk(view, block, size_class);
      if (now == want) return;
      want = now;
    }
  }

  SOAHEAP_HD static bool has_free_chunk(const View& view, std::uint64_t block, int size_class) {
    const std::uint32_t block_class = atomic_load(&view.headers[block].class_id);
    const std::uint64_t allocation = atomic_load(&view.headers[block].allocation);
    if (block_class != Layout::class_id_of(size_class) || allocation == kInvalidatedBitmap) return false;
    return (~allocation & Layout::full_mask(size_class)) != 0;
  }

  /// Starts @p block (just taken from the free bitmap) as a block of @p size_class holding @p chunks.
  SOAHEAP_HD static void start_block(const View& view, std::uint64_t block, int size_class, std::uint64_t chunks) {
    BlockHeader& header = view.headers[block];
    atomic_store(&header.class_id, Layout::class_id_of(size_class));
    atomic_store(&header.iteration, 0);
    memory_fence();  // a stale reserver that sees the new bitmap must see the new class (rollback)
    atomic_store(&header.allocation, chunks);
    memory_fence();
    allocated(view, size_class).set(block);
    refresh(view, block, size_class);
  }

  /// Gives back @p chunks of a block of @p size_class; false when one of them was not allocated.
  /// A compare-and-swap loop rather than a blind AND, so that a double free can never clear bits of
  /// a free block's invalidated bitmap.
  SOAHEAP_HD static bool release(const View& view, std::uint64_t block, int size_class, std::uint64_t chunks) {
    std::uint64_t* allocation = &view.headers[block].allocation;
    std::uint64_t before = atomic_load(allocation);
    for (;;) {
      // All ones: a free block, unless the class has 64 chunks and the block is full; the
      // allocated bitmap tells them apart (a double free racing with retirement may slip through).
      if (before == kInvalidatedBitmap &&
          (Layout::full_mask(size_class) != kInvalidatedBitmap || !allocated(view, size_class).get(block)))
        return false;
      if ((before & chunks) != chunks) return false;
      const std::uint64_t seen = atomic_cas(allocation, before, before & ~chunks);
      if (seen == before) break;
      before = seen;
    }
    const std::uint64_t after = before & ~chunks;
    if (after == 0) {
      retire(view, block, size_class);
    } else if ((before & Layout::full_mask(size_class)) == Layout::full_mask(size_class)) {
      refresh(view, block, size_class);  // it was full and has room now
    }
    return true;
  }

  /// Returns an emptied block to the free bitmap unless a chunk was reserved in it meanwhile.
  SOAHEAP_HD static void retire(const View& view, std::uint64_t block, int size_class) {
    if (atomic_cas(&view.headers[block].allocation, 0, kInvalidatedBitmap) != 0) {
      refresh(view, block, size_class);
      return;
    }
    active(view, size_class).clear(block);
    allocated(view, size_class).clear(block);
    view.count_block_freed();
    memory_fence();
    view.free_blocks().set(block);
  }

  /// Reserves up to @p wanted free chunks of @p block for @p size_class (0: none); @p aim: see
  /// HeapView::choose_slots.
  SOAHEAP_HD static std::uint64_t try_reserve(const View& view, std::uint64_t block, int size_class, int wanted,
                                              std::uint32_t seed, int aim = -1) {
    BlockHeader& header = view.headers[block];
    const std::uint64_t full = Layout::full_mask(size_class);
    for (;;) {
      const std::uint64_t allocation = atomic_load(&header.allocation);
      const std::uint64_t free_chunks = ~allocation & full;
      if (free_chunks == 0 || allocation == kInvalidatedBitmap) {
        refresh(view, block, size_class);  // the active bit we followed is stale
        return 0;
      }
      const std::uint64_t chosen = View::choose_slots(free_chunks, wanted, seed, aim);
      const std::uint64_t before = atomic_fetch_or(&header.allocation, chosen);
      const std::uint64_t reserved = chosen & ~before;
      if (reserved == 0) continue;  // others took them first, and so made progress
      memory_fence();
      const std::uint32_t block_class = atomic_load(&header.class_id);
      if (block_class != Layout::class_id_of(size_class)) {
        // Retired and restarted for another class (untyped or managed) since we found it.
        release_untyped_chunks(view, block, block_class, reserved);
        return 0;
      }
      if (((before | reserved) & full) == full) refresh(view, block, size_class);
      return reserved;
    }
  }

  /// Finds a block of @p size_class (or starts one) and reserves up to @p wanted chunks in it; at
  /// least one unless the heap is out of memory.
  /// @p aim: see try_reserve (a lane of a diverged warp passes its rank among the lanes allocating
  /// with it, so that lanes sharing the warp's seed, and so its blocks, take different chunks).
  SOAHEAP_HD static Reservation reserve(const View& view, int size_class, int wanted, std::uint32_t seed, int aim = -1) {
    const BitmapView active_bits = active(view, size_class);
    int rounds_without_any_block = 0;
    for (int round = 0; round < kMaxAllocationRounds; ++round) {
      const std::uint32_t round_seed = seed + static_cast<std::uint32_t>(round) * 0x9e3779b9u;
      for (int lookup = 0; lookup < kActiveLookupAttempts; ++lookup) {
        const std::uint64_t block = active_bits.try_find_set(round_seed ^ (static_cast<std::uint32_t>(lookup) << 24));
        if (block == BitmapView::kNotFound) {
          if (active_bits.appears_empty()) break;
          continue;  // a summary bit over a word just emptied: look again (see HeapView::reserve_slots)
        }
        const std::uint64_t chunks = try_reserve(view, block, size_class, wanted, round_seed + lookup, aim);
        if (chunks != 0) return {block, chunks};
      }
      if (aim > 0 && round < kFollowerRounds) {
        back_off(round);  // the warp's first lane is probably starting a block with room for us
        continue;
      }
      const std::uint64_t block = take_free_block(view, round_seed);
      if (block != BitmapView::kNotFound) {
        const int capacity = Layout::capacity(size_class);
        const std::uint64_t chunks = low_bits(wanted < capacity ? wanted : capacity);
        start_block(view, block, size_class, chunks);
        atomic_fetch_add(&view.state->blocks_in_transit, ~std::uint64_t{0});  // published now
        view.count_block_taken();
        return {block, chunks};
      }
      // A failed pick with free blocks left only lost races to other takers: try again.
      if (active_bits.appears_empty() && view.free_blocks().appears_empty() &&
          view.out_of_memory_stands(rounds_without_any_block))
        return {0, 0};
    }
    return {0, 0};
  }

  /// Takes a block from the free bitmap, counted in transit until the caller publishes it (on
  /// success the caller ends the transit; on failure it has ended here).
  SOAHEAP_HD static std::uint64_t take_free_block(const View& view, std::uint32_t seed) {
    atomic_fetch_add(&view.state->blocks_in_transit, 1);
    const std::uint64_t block = view.free_blocks().clear_any(seed);
    if (block == BitmapView::kNotFound) atomic_fetch_add(&view.state->blocks_in_transit, ~std::uint64_t{0});
    return block;
  }

  // ---- runs of blocks -------------------------------------------------------------------------------
  /// First block of @p length contiguous free blocks, scanning from word @p start_word round the
  /// heap (a run never wraps), or kNotFound. Upper bitmap levels skip empty regions 4096 blocks at a time.
  SOAHEAP_HD static std::uint64_t find_run(const View& view, std::uint64_t length, std::uint64_t start_word) {
    const BitmapView free_bits = view.free_blocks();
    const std::uint64_t words = view.bitmap_shape.level_words[0];
    const bool has_summary = view.bitmap_shape.level_count > 1;
    for (int pass = 0; pass < 2; ++pass) {
      const std::uint64_t begin = pass == 0 ? start_word : 0;
      // The second pass runs past start_word far enough to find a run that crosses it.
      const std::uint64_t overlap = start_word + (length + 63) / 64 + 1;
      const std::uint64_t end = pass == 0 ? words : (overlap < words ? overlap : words);
      std::uint64_t run = 0;        // free blocks that end at the current word boundary
      std::uint64_t run_first = 0;  // where they begin
      for (std::uint64_t w = begin; w < end; ++w) {
        if (has_summary && w % 64 == 0 && atomic_load(&free_bits.word(1, w / 64)) == 0) {
          run = 0;
          w += 63;
          continue;
        }
        const std::uint64_t value = atomic_load(&free_bits.word(0, w));
        if (value == ~std::uint64_t{0}) {
          if (run == 0) run_first = w * 64;
          run += 64;
          if (run >= length) return run_first;
          continue;
        }
        const std::uint64_t trailing = static_cast<std::uint64_t>(lowest_set_bit(~value));
        if (run > 0 && run + trailing >= length) return run_first;
        if (length <= 64) {
          const std::uint64_t starts = run_starts(value, static_cast<int>(length));
          if (starts != 0) return w * 64 + static_cast<std::uint64_t>(lowest_set_bit(starts));
        }
        run = static_cast<std::uint64_t>(leading_ones(value));
        run_first = w * 64 + 64 - run;
      }
    }
    return BitmapView::kNotFound;
  }

  /// Mask of the blocks of [first, first + length) that lie in level-0 word @p word.
  SOAHEAP_HD static std::uint64_t run_mask(std::uint64_t word, std::uint64_t first, std::uint64_t length) {
    const std::uint64_t lo = first > word * 64 ? first - word * 64 : 0;
    const std::uint64_t end = first + length;
    const std::uint64_t hi = end < word * 64 + 64 ? end - word * 64 : 64;
    return low_bits(static_cast<int>(hi)) & ~low_bits(static_cast<int>(lo));
  }

  /// Clears the free bits of [first, first + length) word by word; if another thread owned one of
  /// them first, gives back what it took and returns false.
  SOAHEAP_HD static bool claim_run(const View& view, std::uint64_t first, std::uint64_t length) {
    const BitmapView free_bits = view.free_blocks();
    const std::uint64_t first_word = first / 64;
    const std::uint64_t last_word = (first + length - 1) / 64;
    for (std::uint64_t w = first_word; w <= last_word; ++w) {
      const std::uint64_t mask = run_mask(w, first, length);
      const std::uint64_t taken = free_bits.clear_in_word(w, mask) & mask;
      if (taken == mask) continue;
      if (taken != 0) free_bits.set_in_word(w, taken);
      for (std::uint64_t back = first_word; back < w; ++back) free_bits.set_in_word(back, run_mask(back, first, length));
      return false;
    }
    return true;
  }

  SOAHEAP_HD static void* allocate_run(const View& view, std::uint64_t bytes, std::uint32_t seed) {
    const std::uint64_t length = (bytes + kBlockBytes - 1) / kBlockBytes;
    if (length > view.block_count) {
      record(view, HeapErrorKind::untyped_out_of_memory, bytes);
      return nullptr;
    }
    const std::uint64_t words = view.bitmap_shape.level_words[0];
    int rounds_without_run = 0;
    for (int round = 0; round < kMaxAllocationRounds; ++round) {
      atomic_fetch_add(&view.state->blocks_in_transit, 1);  // claimed bits may be given back
      // Runs of a word's worth of blocks or more are placed first-fit from the heap's start, which
      // keeps the remaining free space in few large holes (placing them anywhere soon leaves no hole
      // for the next large request); shorter runs start at a random word to spread contention.
      const std::uint64_t start = length >= 64 ? 0 : mix_seed(seed + static_cast<std::uint32_t>(round)) % words;
      const std::uint64_t first = find_run(view, length, start);
      if (first != BitmapView::kNotFound && claim_run(view, first, length)) {
        start_run(view, first, length);
        atomic_fetch_add(&view.state->blocks_in_transit, ~std::uint64_t{0});
        // The heap's count of blocks in use and its peak, for the whole run at once.
        atomic_max(&view.state->peak_allocated_blocks, atomic_fetch_add(&view.state->allocated_blocks, length) + length);
        return reinterpret_cast<void*>(view.data_address(first));
      }
      atomic_fetch_add(&view.state->blocks_in_transit, ~std::uint64_t{0});
      if (first == BitmapView::kNotFound && view.out_of_memory_stands(rounds_without_run)) break;
    }
    record(view, HeapErrorKind::untyped_out_of_memory, bytes);
    return nullptr;
  }

  /// Marks a claimed run in the headers and the run bitmap. Its blocks keep the invalidated
  /// allocation bitmap they had while free, so a stale object reservation can never take a slot.
  SOAHEAP_HD static void start_run(const View& view, std::uint64_t first, std::uint64_t length) {
    for (std::uint64_t block = first; block < first + length; ++block) {
      BlockHeader& header = view.headers[block];
      atomic_store(&header.iteration, block == first ? length : first);
      atomic_store(&header.class_id, block == first ? kUntypedRunHeadId : kUntypedRunBodyId);
    }
    memory_fence();
    const BitmapView runs = run_blocks(view);
    for (std::uint64_t w = first / 64; w <= (first + length - 1) / 64; ++w) runs.set_in_word(w, run_mask(w, first, length));
  }

  /// Frees the run that starts at @p first; false when it is no live run head (double free).
  SOAHEAP_HD static bool free_run(const View& view, std::uint64_t first) {
    BlockHeader& header = view.headers[first];
    // One compare-and-swap decides which of two concurrent frees of the same run wins.
    if (atomic_cas32(&header.class_id, kUntypedRunHeadId, kUntypedRunFreedId) != kUntypedRunHeadId) return false;
    const std::uint64_t length = atomic_load(&header.iteration);
    const BitmapView runs = run_blocks(view);
    const BitmapView free_bits = view.free_blocks();
    for (std::uint64_t w = first / 64; w <= (first + length - 1) / 64; ++w) runs.clear_in_word(w, run_mask(w, first, length));
    atomic_fetch_add(&view.state->allocated_blocks, ~length + 1);  // -length
    memory_fence();
    for (std::uint64_t w = first / 64; w <= (first + length - 1) / 64; ++w)
      free_bits.set_in_word(w, run_mask(w, first, length));
    return true;
  }

  // ---- the entry points -------------------------------------------------------------------------
  /// Size class of a request, Layout::kClassCount for a run, or -1 for a bad alignment.
  SOAHEAP_HD static int route(std::uint64_t bytes, std::uint64_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxUntypedAlignment) return -1;
    if (alignment < kUntypedAlignment) alignment = kUntypedAlignment;
    const int size_class = Layout::size_class_for(bytes, alignment);
    return size_class >= 0 ? size_class : Layout::kClassCount;
  }

  /// One thread's request (the host backend's path; on the device, runs and lanes of a diverged
  /// warp, with their rank as @p aim).
  SOAHEAP_HD static void* allocate_alone(const View& view, std::uint64_t bytes, int route_class, std::uint32_t seed,
                                         int aim = -1) {
    // Lanes of one warp share the seed: runs start their scans apart by rank.
    if (route_class == Layout::kClassCount)
      return allocate_run(view, bytes, seed + static_cast<std::uint32_t>(aim > 0 ? aim : 0) * 0x9e3779b9u);
    const Reservation reservation = reserve(view, route_class, 1, seed, aim);
    if (reservation.slots == 0) {
      record(view, HeapErrorKind::untyped_out_of_memory, bytes);
      return nullptr;
    }
    return chunk_address(view, reservation.block, route_class, lowest_set_bit(reservation.slots));
  }

  SOAHEAP_HD static void* chunk_address(const View& view, std::uint64_t block, int size_class, int chunk) {
    return reinterpret_cast<void*>(view.data_address(block) +
                                   static_cast<std::uint64_t>(chunk) * Layout::chunk_bytes(size_class));
  }

  SOAHEAP_HD static void* allocate(const View& view, std::uint64_t bytes, std::uint64_t alignment) {
    const int route_class = route(bytes, alignment);
    if (route_class < 0) {
      record(view, HeapErrorKind::invalid_alignment, alignment);
      return nullptr;
    }
#if SOAHEAP_DEVICE_CODE
    return allocate_in_warp(view, bytes, route_class);
#else
    if (bytes == 0) return nullptr;
    const std::uint32_t seed =
        mix_seed((std::uint64_t{ThreadPool::current_worker()} << 32) ^ next_host_seed());
    void* result = allocate_alone(view, bytes, route_class, seed);
    count_allocations(view, result != nullptr ? 1 : 0, result != nullptr ? bytes : 0, result != nullptr ? 0 : 1);
    return result;
#endif
  }

  SOAHEAP_HD static void count_allocations(const View& view, std::uint64_t successes, std::uint64_t bytes,
                                           std::uint64_t failures) {
    UntypedCounters& counters = view.state->untyped;
    if (successes != 0) atomic_fetch_add(&counters.allocations, successes);
    if (bytes != 0) atomic_fetch_add(&counters.bytes_requested, bytes);
    if (failures != 0) atomic_fetch_add(&counters.failures, failures);
  }

  SOAHEAP_HD static void deallocate(const View& view, void* pointer) {
    if (pointer == nullptr) return;
#if SOAHEAP_DEVICE_CODE
    if (!whole_warp_converged()) {
      atomic_fetch_add(&view.state->untyped.frees, 1);
    } else if (lane_id() == 0) {
      atomic_fetch_add(&view.state->untyped.frees, 32);  // one atomic for the whole warp
    }
#else
    atomic_fetch_add(&view.state->untyped.frees, 1);
#endif
    const auto address = reinterpret_cast<std::uint64_t>(pointer);
    if (address < view.data_base || address >= view.data_address(view.block_count)) {
      record(view, HeapErrorKind::free_of_foreign_pointer, address);
      return;
    }
    const std::uint64_t block = (address - view.data_base) / kBlockBytes;
    const std::uint64_t offset = (address - view.data_base) % kBlockBytes;
    const std::uint32_t block_class = atomic_load(&view.headers[block].class_id);
    const int size_class = Layout::size_class_of_id(block_class);
    if (size_class >= 0) {
      const std::uint64_t chunk = offset / Layout::chunk_bytes(size_class);
      if (offset % Layout::chunk_bytes(size_class) != 0 || chunk >= static_cast<std::uint64_t>(Layout::capacity(size_class))) {
        record(view, HeapErrorKind::free_of_foreign_pointer, address);
        return;
      }
#ifdef SOAHEAP_CHECKED
      if (!allocated(view, size_class).get(block)) {
        record(view, HeapErrorKind::free_of_unallocated_memory, address);
        return;
      }
#endif
      release_fence();  // the chunk's data stores are visible before the chunk is free again
      if (!release(view, block, size_class, std::uint64_t{1} << chunk))
        record(view, HeapErrorKind::free_of_unallocated_memory, address);
      return;
    }
    if (offset == 0 && (block_class == kUntypedRunHeadId || block_class == kUntypedRunFreedId)) {
      release_fence();
      if (!free_run(view, block)) record(view, HeapErrorKind::free_of_unallocated_memory, address);
      return;
    }
    // Inside a run, an object block, or a free block that never held untyped memory.
    record(view, block_class == kUntypedRunBodyId || view.free_blocks().get(block)
                     ? HeapErrorKind::free_of_unallocated_memory
                     : HeapErrorKind::free_of_foreign_pointer,
           address);
  }

 private:
#if SOAHEAP_DEVICE_CODE
  /// A whole converged warp whose requests share one size class is served by lane 0, which
  /// reserves chunks for all 32 lanes block by block (as for objects). Every other request — lanes
  /// of a partial or diverged warp, mixed size classes, runs — is served alone: a reservation is
  /// handed from lane to lane only within the whole warp (the invariant of
  /// HeapView::allocate_slot_in_warp and "Warp aggregation" in docs/architecture.md).
  __device__ static void* allocate_in_warp(const View& view, std::uint64_t bytes, int route_class) {
    const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    // Zero-byte requests get nullptr without an error, like a run of their own.
    const unsigned label = bytes == 0 ? static_cast<unsigned>(Layout::kClassCount) + 1 : static_cast<unsigned>(route_class);
    const bool converged = whole_warp_converged();
    int one_chunk_class = 0;
    if (converged) {
      __match_all_sync(kFullWarp, label, &one_chunk_class);
      one_chunk_class = one_chunk_class && label < static_cast<unsigned>(Layout::kClassCount);
    }
    std::uint64_t pointer = 0;
    if (one_chunk_class) {
      const int lane = lane_id();
      std::uint32_t seed = mix_seed((thread / 32) ^ (static_cast<std::uint64_t>(clock64()) << 20));
      int served = 0;
      while (served < 32) {
        Reservation reservation{0, 0};
        if (lane == 0) reservation = reserve(view, route_class, 32 - served, seed);
        const std::uint64_t block = __shfl_sync(kFullWarp, reservation.block, 0);
        const std::uint64_t chunks = __shfl_sync(kFullWarp, reservation.slots, 0);
        if (chunks == 0) break;  // out of memory: the remaining lanes get nullptr
        const int granted = popcount(chunks);
        if (lane >= served && lane < served + granted)
          pointer = reinterpret_cast<std::uint64_t>(chunk_address(view, block, route_class, nth_set_bit(chunks, lane - served)));
        served += granted;
        seed = mix_seed(seed + 1);
      }
      if (pointer == 0) record(view, HeapErrorKind::untyped_out_of_memory, bytes);
    } else if (bytes != 0) {
      // As for objects: the warp's seed and the lane's rank steer lanes to the same blocks, apart.
      const unsigned lanes = __activemask();
      const std::uint32_t seed = mix_seed((thread / 32) ^ (std::uint64_t{lanes} << 32) ^ route_class);
      pointer = reinterpret_cast<std::uint64_t>(allocate_alone(view, bytes, route_class, seed, popcount(lanes & lanes_below())));
    }
    const std::uint64_t succeeded = pointer != 0 ? 1 : 0;
    const std::uint64_t failed = bytes != 0 && pointer == 0 ? 1 : 0;
    if (converged) {  // every lane of the warp is here: count with one atomic per counter
      const std::uint64_t successes = whole_warp_sum(succeeded);
      const std::uint64_t requested = whole_warp_sum(succeeded * bytes);
      const std::uint64_t failures = whole_warp_sum(failed);
      if (lane_id() == 0) count_allocations(view, successes, requested, failures);
    } else {
      count_allocations(view, succeeded, succeeded * bytes, failed);
    }
    return reinterpret_cast<void*>(pointer);
  }
#else
  static std::uint64_t next_host_seed() {
    static thread_local std::uint64_t counter = 0;
    return ++counter;
  }
#endif

  SOAHEAP_HD static std::uint32_t atomic_cas32(std::uint32_t* address, std::uint32_t expected, std::uint32_t desired) {
#if SOAHEAP_DEVICE_CODE
    return atomicCAS(reinterpret_cast<unsigned int*>(address), expected, desired);
#else
    __atomic_compare_exchange_n(address, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
#endif
  }
};

template <class View>
SOAHEAP_HD bool release_untyped_chunks(const View& view, std::uint64_t block, std::uint32_t block_class,
                                       std::uint64_t chunks) {
  const int size_class = View::Untyped::size_class_of_id(block_class);
  if (size_class >= 0) return Untyped<View>::release(view, block, size_class, chunks);
  if (block_class < static_cast<std::uint32_t>(View::kClassCount)) return view.release_slots(block, chunks);
  return false;  // run blocks and free blocks hold no reservable slots
}

/// Per 256 blocks: per size class blocks, used chunks and active blocks; then run heads and run blocks.
template <class View>
struct UntypedStatisticsKernel {
  using Layout = typename View::Untyped;
  static constexpr std::uint64_t kBlocksPerThread = 256;
  static constexpr int kCounters = 3 * Layout::kClassCount + 2;
  View view;
  std::uint64_t* counters;
  SOAHEAP_HD void operator()(std::uint64_t chunk) const {
    std::uint64_t local[kCounters] = {};
    const std::uint64_t begin = chunk * kBlocksPerThread;
    const std::uint64_t end = begin + kBlocksPerThread < view.block_count ? begin + kBlocksPerThread : view.block_count;
    const BitmapView runs = Untyped<View>::run_blocks(view);
    for (std::uint64_t block = begin; block < end; ++block) {
      if (runs.get(block)) {
        local[3 * Layout::kClassCount + 1] += 1;
        if (atomic_load(&view.headers[block].class_id) == kUntypedRunHeadId) local[3 * Layout::kClassCount] += 1;
        continue;
      }
      const int k = Layout::size_class_of_id(atomic_load(&view.headers[block].class_id));
      if (k < 0 || !Untyped<View>::allocated(view, k).get(block)) continue;
      local[3 * k] += 1;
      local[3 * k + 1] += popcount(atomic_load(&view.headers[block].allocation) & Layout::full_mask(k));
      local[3 * k + 2] += Untyped<View>::active(view, k).get(block) ? 1 : 0;
    }
    for (int c = 0; c < kCounters; ++c)
      if (local[c] != 0) atomic_fetch_add(&counters[c], local[c]);
  }
};

/// True for the error kinds that soaheap::malloc / soaheap::free record.
inline bool is_untyped_error(HeapErrorKind kind) {
  return kind == HeapErrorKind::untyped_out_of_memory || kind == HeapErrorKind::free_of_unallocated_memory ||
         kind == HeapErrorKind::free_of_foreign_pointer || kind == HeapErrorKind::invalid_alignment;
}

/// Throws the exception for an untyped error that a kernel recorded (@p payload: the requested size,
/// the freed address or the alignment).
[[noreturn]] inline void throw_untyped_error(HeapErrorKind kind, std::uint64_t payload, std::uint64_t block_count,
                                             std::uint64_t heap_bytes, std::uint64_t block_bytes) {
  std::ostringstream message;
  message << "soaheap: ";
  switch (kind) {
    case HeapErrorKind::untyped_out_of_memory:
      message << "out of memory in soaheap::malloc of " << payload << " bytes"
              << (payload > block_bytes ? " (" + std::to_string((payload + block_bytes - 1) / block_bytes) +
                                              " contiguous blocks)"
                                        : std::string())
              << ": the " << heap_bytes << "-byte heap of " << block_count << " blocks of " << block_bytes
              << " bytes has no room for it; malloc returned nullptr. Free memory or create a larger heap";
      throw out_of_memory(message.str());
    case HeapErrorKind::free_of_unallocated_memory:
      message << "soaheap::free of 0x" << std::hex << payload << std::dec
              << ", which is not allocated (freed twice, or inside a larger allocation)";
      throw usage_error(message.str());
    case HeapErrorKind::free_of_foreign_pointer:
      message << "soaheap::free of 0x" << std::hex << payload << std::dec
              << ", which soaheap::malloc of this heap did not return";
      throw usage_error(message.str());
    default:
      message << "soaheap::malloc_aligned with alignment " << payload << ": it must be a power of two up to "
              << kMaxUntypedAlignment;
      throw invalid_argument(message.str());
  }
}

/// heap.stats()'s untyped part: one kernel over the headers, plus the cumulative counters.
template <class View>
UntypedStats collect_untyped_stats(const Executor& executor, const View& view, const Memory& runtime_state) {
  using Kernel = UntypedStatisticsKernel<View>;
  using Layout = typename View::Untyped;
  Memory counters(executor.backend, Kernel::kCounters * sizeof(std::uint64_t));
  counters.fill_zero();
  executor.run((view.block_count + Kernel::kBlocksPerThread - 1) / Kernel::kBlocksPerThread,
               Kernel{view, counters.as<std::uint64_t>()});
  std::vector<std::uint64_t> values(Kernel::kCounters);
  counters.copy_to_host(values.data(), 0, values.size() * sizeof(std::uint64_t));
  UntypedCounters totals{};
  runtime_state.copy_to_host(&totals, offsetof(HeapRuntimeState, untyped), sizeof(totals));
  UntypedStats stats;
  stats.block_bytes = Layout::kBlockBytes;
  for (int k = 0; k < Layout::kClassCount; ++k) {
    UntypedSizeClassStats entry;
    entry.chunk_bytes = Layout::chunk_bytes(k);
    entry.capacity = Layout::capacity(k);
    entry.blocks = values[3 * k];
    entry.used_chunks = values[3 * k + 1];
    entry.active_blocks = values[3 * k + 2];
    stats.size_classes.push_back(entry);
  }
  stats.runs = values[3 * Layout::kClassCount];
  stats.run_blocks = values[3 * Layout::kClassCount + 1];
  stats.allocations_total = totals.allocations;
  stats.bytes_requested_total = totals.bytes_requested;
  stats.frees_total = totals.frees;
  stats.failures_total = totals.failures;
  return stats;
}

}  // namespace detail

/// @brief Allocates @p bytes of untyped memory from @p heap, aligned to 16 bytes; callable in
/// kernels (cuda) and host-backend threads. Requests up to one block share blocks by size class;
/// larger ones take contiguous blocks.
/// @return the memory, or nullptr when @p bytes is 0 or the heap has no room (then an
///         out_of_memory naming the size is thrown by the next host call on the heap)
/// @param heap a HeapView (`heap.view()`)
template <class... Classes>
SOAHEAP_HD void* malloc(const HeapView<Classes...>& heap, std::uint64_t bytes) {
  return detail::Untyped<HeapView<Classes...>>::allocate(heap, bytes, detail::kUntypedAlignment);
}

/// @brief malloc with an @p alignment (a power of two up to 128 bytes).
/// @return nullptr for any other alignment, recording an error that the next host call throws
template <class... Classes>
SOAHEAP_HD void* malloc_aligned(const HeapView<Classes...>& heap, std::uint64_t bytes, std::uint64_t alignment) {
  return detail::Untyped<HeapView<Classes...>>::allocate(heap, bytes, alignment);
}

/// @brief Frees memory that soaheap::malloc of the same heap returned (nullptr is ignored). A
/// double free or a pointer malloc did not return is recorded and thrown by the next host call;
/// the checked mode (SOAHEAP_CHECKED) also cross-checks the block's bitmap.
template <class... Classes>
SOAHEAP_HD void free(const HeapView<Classes...>& heap, void* pointer) {
  detail::Untyped<HeapView<Classes...>>::deallocate(heap, pointer);
}

}  // namespace soaheap
