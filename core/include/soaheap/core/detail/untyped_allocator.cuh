#pragma once
/// @file detail/untyped_allocator.cuh
/// @brief The algorithms behind `soaheap::malloc` / `soaheap::free` (untyped_memory.cuh).
///
/// Requests that fit a chunk smaller than a block are rounded to a size class (untyped_layout.cuh);
/// a block of untyped memory holds chunks of one class, found through the class's own
/// allocated/active bitmaps and reserved in the block's 64-bit allocation bitmap exactly as object
/// slots are, by the one reservation core (detail/slot_reservation.cuh). Larger requests take a run of contiguous free
/// blocks (detail/block_runs.cuh); their data segments are contiguous because block headers live in
/// a table of their own.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/backend.cuh>
#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/detail/block_runs.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/core/thread_pool.hpp>
#include <soaheap/core/untyped_layout.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Class field of recorded untyped errors (no managed class has it).
inline constexpr int kUntypedErrorClass = 0xfe;
/// Largest value the 48-bit block field of a recorded error can carry (sizes beyond it are clamped).
inline constexpr std::uint64_t kMaxErrorPayload = (std::uint64_t{1} << 48) - 1;

/// The untyped-memory algorithms over a heap's internals (HeapInternals).
template <class View>
struct Untyped {
  using Layout = typename View::Untyped;
  static constexpr std::uint64_t kBlockBytes = Layout::kBlockBytes;

  // ---- bitmaps -------------------------------------------------------------------------------------
  SOAHEAP_HD static BitmapView allocated(const View& view, int size_class) {
    return view.untyped_class(size_class).allocated;
  }
  SOAHEAP_HD static BitmapView active(const View& view, int size_class) { return view.untyped_class(size_class).active; }
  /// Every block that belongs to a run. Read bit by bit only (stats, validate), never searched, so
  /// it keeps level 0 alone: its upper levels cost a run's start and its free a climb of dependent
  /// atomics and fences (decision 033).
  SOAHEAP_HD static BitmapView run_blocks(const View& view) { return view.untyped_run_blocks(); }

  SOAHEAP_HD static void record(const View& view, HeapErrorKind kind, std::uint64_t payload) {
    view.record_error(kind, kUntypedErrorClass, payload < kMaxErrorPayload ? payload : kMaxErrorPayload);
  }

  // ---- runs of blocks (detail/block_runs.cuh finds and claims them) -------------------------------
  SOAHEAP_HD static void* allocate_run(const View& view, std::uint64_t bytes, std::uint32_t seed) {
    const std::uint64_t length = (bytes + kBlockBytes - 1) / kBlockBytes;
    if (length > view.block_count) {
      record(view, HeapErrorKind::untyped_out_of_memory, bytes);
      return nullptr;
    }
    const std::uint64_t words = view.block_words();
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
      if (first == BitmapView::kNotFound && out_of_memory_stands(view, rounds_without_run)) {
        if (!grow_heap(view, length)) break;  // a growable heap appends blocks, and the run fits there
        rounds_without_run = 0;
      }
    }
    record(view, HeapErrorKind::untyped_out_of_memory, bytes);
    return nullptr;
  }

  /// Marks a claimed run in the headers and the run bitmap. Its blocks keep the invalidated
  /// allocation bitmap they had while free, so a stale object reservation can never take a slot.
  SOAHEAP_HD static void start_run(const View& view, std::uint64_t first, std::uint64_t length) {
    for (std::uint64_t block = first; block < first + length; ++block) {
      BlockHeader& header = view.headers[block];
      atomic_store(&header.run, static_cast<std::uint32_t>(block == first ? length : first));
      atomic_store(&header.class_id, block == first ? kUntypedRunHeadId : kUntypedRunBodyId);
    }
    memory_fence();
    assign_run_bits_in_level0(run_blocks(view), first, length, true);
  }

  /// Frees the run that starts at @p first; false when it is no live run head (double free).
  SOAHEAP_HD static bool free_run(const View& view, std::uint64_t first) {
    BlockHeader& header = view.headers[first];
    // One compare-and-swap decides which of two concurrent frees of the same run wins.
    if (atomic_cas(&header.class_id, kUntypedRunHeadId, kUntypedRunFreedId) != kUntypedRunHeadId) return false;
    const std::uint64_t length = atomic_load(&header.run);
    assign_run_bits_in_level0(run_blocks(view), first, length, false);
    atomic_fetch_add(&view.state->allocated_blocks, ~length + 1);  // -length
    memory_fence();
    set_run_bits(view.free_blocks(), first, length);
    return true;
  }

  // ---- the entry points -------------------------------------------------------------------------
  /// Size class of a request, Layout::kClassCount for a run, or -1 for a bad alignment. A request
  /// whose class would be the whole-block one takes a run of one block: the same memory, without
  /// starting and retiring a block of the class (its bitmaps) at every request and without regions
  /// of single chunks. That class stays for requests whose own class is full (larger_class).
  SOAHEAP_HD static int route(std::uint64_t bytes, std::uint64_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxUntypedAlignment) return -1;
    if (alignment < kUntypedAlignment) alignment = kUntypedAlignment;
    const int size_class = Layout::size_class_for(bytes, alignment);
    constexpr int kWholeBlockClass = Layout::kClassCount - 1;
    return size_class >= 0 && size_class != kWholeBlockClass ? size_class : Layout::kClassCount;
  }

  /// A chunk for one thread's request of @p bytes routed to @p route_class: the host backend's path
  /// (rank -1). Where that class has no room, a larger one (larger_class).
  SOAHEAP_HD static void* allocate_chunk(const View& view, std::uint64_t bytes, int route_class, std::uint64_t alignment,
                                         std::uint32_t seed) {
    int size_class = route_class;
    Reservation reservation = reserve_chunk(view, size_class, seed);
    while (reservation.slots == 0 && reservation.failure == HeapErrorKind::out_of_memory &&
           (size_class = larger_class(view, route_class, size_class, alignment)) >= 0)
      reservation = reserve_chunk(view, size_class, seed);
    if (reservation.slots == 0) {
      // Starvation too: the payload must carry the size, and the message covers contention.
      record(view, HeapErrorKind::untyped_out_of_memory, bytes);
      return nullptr;
    }
    return chunk_address(view, reservation.block, size_class, lowest_set_bit(reservation.slots));
  }

  /// One chunk of @p size_class for a host thread: from a current region where the class takes
  /// them, else through the core, else from any region before out of memory.
  SOAHEAP_HD static Reservation reserve_chunk(const View& view, int size_class, std::uint32_t seed) {
    const SlotClass slot_class = view.untyped_class(size_class);
    std::uint64_t* const current = region(view, slot_class, size_class);
    Reservation reservation{0, 0, HeapErrorKind::none};
    if (current != nullptr) reservation = take_one_from_region(view, slot_class, region_shard(current, seed), seed);
    if (reservation.slots == 0) reservation = reserve(view, slot_class, 1, seed);
    if (reservation.slots == 0) reservation = look_again_at_regions(view, slot_class, current, seed + 1, reservation);
    return reservation;
  }

  /// @brief The size class after @p tried that a request routed to @p route_class takes when the
  /// classes up to @p tried are out of memory, or -1: chunks at most twice the route's (what a
  /// request may waste), aligned as asked, and room in sight — an active block of the class, or a
  /// free block to start one. A span (a request over half a block) whose class finds no run of
  /// free blocks takes a whole block this way while single free blocks remain, and a class with
  /// no block left takes room in a larger class's blocks: the heap fills to the last chunk that
  /// fits instead of failing the first request whose own class is full (decision 031).
  SOAHEAP_HD static int larger_class(const View& view, int route_class, int tried, std::uint64_t alignment) {
    const std::uint64_t most = 2 * Layout::chunk_bytes(route_class);
    const bool free_block = !view.free_blocks().appears_empty();
    for (int k = tried + 1; k < Layout::kClassCount && Layout::chunk_bytes(k) <= most; ++k) {
      if (Layout::chunk_bytes(k) % alignment != 0) continue;
      if (free_block || !active(view, k).appears_empty()) return k;
    }
    return -1;
  }

  /// The kRegionShards current-region words of @p size_class (detail/current_region.cuh), or
  /// nullptr where the heap is too small for the class to take regions.
  SOAHEAP_HD static std::uint64_t* region(const View& view, const SlotClass& slot_class, int size_class) {
    return takes_regions(view, slot_class) ? region_words(view, size_class) : nullptr;
  }
  SOAHEAP_HD static std::uint64_t* region_words(const View& view, int size_class) {
    return &view.state->untyped_regions[static_cast<std::uint64_t>(size_class) * kRegionShards];
  }

  /// Gives back the slots of @p size_class's current regions that were never handed out (between kernels).
  SOAHEAP_HD static void give_back_regions(const View& view, int size_class) {
    const SlotClass slot_class = view.untyped_class(size_class);
    for (std::uint64_t shard = 0; shard < kRegionShards; ++shard)
      give_back_region(view, slot_class, region_words(view, size_class) + shard);
  }

  SOAHEAP_HD static void* chunk_address(const View& view, std::uint64_t block, int size_class, int chunk) {
    return reinterpret_cast<void*>(view.data_address(block) +
                                   static_cast<std::uint64_t>(chunk) * Layout::chunk_bytes(size_class));
  }

  SOAHEAP_HD SOAHEAP_FORCE_INLINE static void* allocate(const View& view, std::uint64_t bytes, std::uint64_t alignment) {
    const int route_class = route(bytes, alignment);
    if (route_class < 0) {
      record(view, HeapErrorKind::invalid_alignment, alignment);
      return nullptr;
    }
#if SOAHEAP_DEVICE_CODE
    return allocate_in_warp(view, bytes, route_class, alignment);
#else
    if (bytes == 0) return nullptr;
    const std::uint32_t seed =
        mix_seed((std::uint64_t{ThreadPool::current_worker()} << 32) ^ next_host_seed());
    void* result = route_class == Layout::kClassCount ? allocate_run(view, bytes, seed)
                                                      : allocate_chunk(view, bytes, route_class, alignment, seed);
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

  /// soaheap::free: a chunk goes back to its block through the reservation core (a converged whole
  /// warp releases the chunks of one block with one atomic), a run head frees its run.
  SOAHEAP_HD static void deallocate(const View& view, void* pointer) {
#if SOAHEAP_DEVICE_CODE
    // Every lane stays to the end (no early return), so a warp converged here is still whole at
    // the release below.
    const bool converged = whole_warp_converged();
    if (converged) {
      const std::uint64_t frees = whole_warp_sum(pointer != nullptr ? 1 : 0);
      if (lane_id() == 0 && frees != 0) atomic_fetch_add(&view.state->untyped.frees, frees);
    } else if (pointer != nullptr) {
      atomic_fetch_add(&view.state->untyped.frees, 1);
    }
#else
    if (pointer == nullptr) return;
    atomic_fetch_add(&view.state->untyped.frees, 1);
#endif
    const auto address = reinterpret_cast<std::uint64_t>(pointer);
    int size_class = -1;
    int chunk = -1;
    const std::uint64_t block = pointer != nullptr ? chunk_of(view, address, size_class, chunk) : BitmapView::kNotFound;
    release_fence();  // the chunk's data stores are visible before the chunk is free again
    bool released = true;
#if SOAHEAP_DEVICE_CODE
    if (converged) {
      // Lanes without a chunk to release take part with kNotFound (their slot class is unused).
      released = release_for_whole_warp(view, view.untyped_class(size_class >= 0 ? size_class : 0), block, chunk);
    } else
#endif
    if (block != BitmapView::kNotFound) {
      released = release_in_block(view, view.untyped_class(size_class), block, std::uint64_t{1} << chunk);
    }
    if (!released) record(view, HeapErrorKind::free_of_unallocated_memory, address);
  }

  /// The block and chunk of @p address when it is a chunk of a size class (their release is left to
  /// the caller); kNotFound otherwise, after freeing a run that starts at @p address or recording
  /// why @p address cannot be freed.
  SOAHEAP_HD static std::uint64_t chunk_of(const View& view, std::uint64_t address, int& size_class, int& chunk) {
    if (address < view.data_base || address >= view.data_address(view.block_count)) {
      record(view, HeapErrorKind::free_of_foreign_pointer, address);
      return BitmapView::kNotFound;
    }
    std::uint64_t block = (address - view.data_base) / kBlockBytes;
    std::uint32_t block_class = atomic_load(&view.headers[block].class_id);
    if (block_class == kUntypedSpanBodyId) {  // a chunk that starts in a later block of its span
      // A span's first block precedes its later ones; anything else is a free racing the span's
      // start or end, never a pointer malloc returned.
      const std::uint64_t first = atomic_load(&view.headers[block].run);
      if (first >= block) {
        record(view, HeapErrorKind::free_of_foreign_pointer, address);
        return BitmapView::kNotFound;
      }
      block = first;
      block_class = atomic_load(&view.headers[block].class_id);
    }
    const std::uint64_t offset = address - view.data_address(block);
    const int found_class = Layout::size_class_of_id(block_class);
    if (found_class >= 0) {
      const std::uint64_t index = offset / Layout::chunk_bytes(found_class);
      if (offset % Layout::chunk_bytes(found_class) != 0 || index >= static_cast<std::uint64_t>(Layout::capacity(found_class))) {
        record(view, HeapErrorKind::free_of_foreign_pointer, address);
        return BitmapView::kNotFound;
      }
#ifdef SOAHEAP_CHECKED
      if (!allocated(view, found_class).get(block)) {
        record(view, HeapErrorKind::free_of_unallocated_memory, address);
        return BitmapView::kNotFound;
      }
#endif
      size_class = found_class;
      chunk = static_cast<int>(index);
      return block;
    }
    if (offset == 0 && (block_class == kUntypedRunHeadId || block_class == kUntypedRunFreedId)) {
      release_fence();
      if (!free_run(view, block)) record(view, HeapErrorKind::free_of_unallocated_memory, address);
      return BitmapView::kNotFound;
    }
    // Inside a run, an object block, or a free block that never held untyped memory.
    record(view, block_class == kUntypedRunBodyId || view.free_blocks().get(block)
                     ? HeapErrorKind::free_of_unallocated_memory
                     : HeapErrorKind::free_of_foreign_pointer,
           address);
    return BitmapView::kNotFound;
  }

 private:
#if SOAHEAP_DEVICE_CODE
  /// Chunks go through the reservation core's reserve_in_warp when the whole warp is converged and
  /// its requests share one size class (one lane may then reserve for all); otherwise, and for
  /// runs, every lane serves itself.
  __device__ SOAHEAP_FORCE_INLINE static void* allocate_in_warp(const View& view, std::uint64_t bytes, int route_class, std::uint64_t alignment) {
    // Zero-byte requests get nullptr without an error, like a run of their own.
    const unsigned label = bytes == 0 ? static_cast<unsigned>(Layout::kClassCount) + 1 : static_cast<unsigned>(route_class);
    const bool converged = whole_warp_converged();
    int one_label = 0;
    if (converged) __match_all_sync(kFullWarp, label, &one_label);
    const unsigned lanes = __activemask();
    std::uint64_t pointer = 0;
    if (bytes != 0 && route_class < Layout::kClassCount) {
      // Only a whole warp of one size class takes a region's slots: lanes of a warp that asks for
      // several (mixed sizes) would each add to the word and install alone; on an H200 they
      // filled a heap of 16 KiB blocks with mixed requests to 91 % instead of 96 % (decision 028).
      int size_class = route_class;
      LaneSlot slot{0, -1, HeapErrorKind::none};
      if (one_label) {
        const SlotClass slot_class = view.untyped_class(route_class);
        slot = reserve_in_warp<true>(view, slot_class, true, static_cast<std::uint64_t>(route_class),
                                     region(view, slot_class, route_class));
      }
      // Each lane on its own: its route's class unless the warp tried it, then larger classes
      // while the tried ones are out of memory (larger_class). One call site keeps the path small
      // enough to inline whole (decision 008).
      bool own = !one_label;
      while (slot.slot < 0) {
        if (own) slot = reserve_for_lane(view, view.untyped_class(size_class), __activemask(), static_cast<std::uint64_t>(size_class));
        if (slot.slot >= 0 || slot.failure != HeapErrorKind::out_of_memory) break;
        size_class = larger_class(view, route_class, size_class, alignment);
        if (size_class < 0) break;
        own = true;
      }
      if (slot.slot >= 0) pointer = reinterpret_cast<std::uint64_t>(chunk_address(view, slot.block, size_class, slot.slot));
      else record(view, HeapErrorKind::untyped_out_of_memory, bytes);
    } else if (bytes != 0) {
      // Lanes of one warp share the seed: their runs start their scans apart by rank.
      const int rank = popcount(lanes & lanes_below());
      const std::uint32_t seed = warp_seed((std::uint64_t{lanes} << 32) ^ Layout::kClassCount) + static_cast<std::uint32_t>(rank) * 0x9e3779b9u;
      pointer = reinterpret_cast<std::uint64_t>(allocate_run(view, bytes, seed));
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
};

}  // namespace soaheap::detail
