#pragma once
/// @file heap_view.cuh
/// @brief `HeapView<Classes...>`: the small, trivially copyable handle that kernels and host threads
///        allocate and destroy objects through, and the lock-free algorithms behind it
///        (DynaSOAr's Alg. 1, 2, 6-9, redone so that no thread ever waits for another).

#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/heap_layout.cuh>
#include <soaheap/base/object_pointer.cuh>
#include <soaheap/base/portability.cuh>
#include <soaheap/core/thread_pool.hpp>
#include <soaheap/core/untyped_layout.cuh>
#include <soaheap/reflection/field.cuh>

#include <cstdint>
#include <new>
#include <type_traits>

namespace soaheap {

/// @brief Kinds of errors a kernel can record for the next host call to report.
enum class HeapErrorKind : std::uint32_t {
  none = 0,
  out_of_memory = 1,         ///< no free block and no active block of the class
  allocation_starved = 2,    ///< kMaxAllocationRounds rounds lost to contention
  destroy_of_free_slot = 3,  ///< destroy of an object that is not alive (double destroy)
  destroy_of_foreign_pointer = 4,  ///< destroy of a pointer outside this heap or with a bad slot/class
  untyped_out_of_memory = 5,       ///< soaheap::malloc found no room (the block field holds the size)
  free_of_unallocated_memory = 6,  ///< soaheap::free of memory that is not allocated (double free)
  free_of_foreign_pointer = 7,     ///< soaheap::free of a pointer that malloc of this heap did not return
  invalid_alignment = 8,           ///< soaheap::malloc_aligned with a bad alignment (the block field holds it)
};

namespace detail {

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
/// block. Such misses mean many lanes are filling the same few blocks; starting a block for each
/// of them leaves blocks half full (docs/performance.md, "Placement of diverged allocations").
inline constexpr int kPackedContendedRounds = 4;

/// Encoded error: kind in bits 0-7, class id in bits 8-15, block id in bits 16-63.
SOAHEAP_HD inline std::uint64_t encode_error(HeapErrorKind kind, int class_id, std::uint64_t block) {
  return static_cast<std::uint64_t>(kind) | (static_cast<std::uint64_t>(class_id & 0xff) << 8) | (block << 16);
}

/// The time parallel_do's enumeration launches ran on cuda (HeapOptions::time_enumeration), kept by
/// the launches themselves (EnumerationStamp): consecutive launches alternate between two
/// intervals; each widens its own to the earliest start and the latest end of its warps and folds
/// the other one, which the launch before it filled, into `nanoseconds`.
struct EnumerationClock {
  std::uint64_t inverted_start[2];  ///< ~(earliest start): widened by atomic max, so zero means unused
  std::uint64_t end[2];             ///< latest end
  std::uint64_t nanoseconds;        ///< intervals folded so far

  /// Interval @p slot in nanoseconds; 0 while unused.
  SOAHEAP_HD std::uint64_t interval(int slot) const {
    if (inverted_start[slot] == 0) return 0;
    const std::uint64_t start = ~inverted_start[slot];
    return end[slot] > start ? end[slot] - start : 0;
  }
  /// Everything measured so far, the last launch's interval included.
  SOAHEAP_HD std::uint64_t total_nanoseconds() const { return nanoseconds + interval(0) + interval(1); }
};

/// Device-side state of a heap that changes at runtime (written by the host between kernels).
struct HeapRuntimeState {
  std::uint64_t error;                     ///< first error recorded since the last host check
  /// cuda: a word of mapped host memory that the first error also sets, so that Heap::synchronize
  /// learns whether there is one without a copy; nullptr on the host backend.
  std::uint64_t* error_signal;
  /// Allocations between taking a block from the free bitmap and publishing it as active: while
  /// any is in flight an empty-looking heap is not yet out of memory.
  std::uint64_t blocks_in_transit;
  /// Blocks not in the free bitmap, and the most there have been since the last reset: kept by the
  /// block slow paths so that tracking peak memory needs no statistics kernel.
  std::uint64_t allocated_blocks;
  std::uint64_t peak_allocated_blocks;
  int defrag_threshold[kMaxClasses];       ///< a block is a defrag candidate with at most this many objects
  /// Rounds a diverged lane looks again before it starts a block when the blocks it found had
  /// filled up (kPackedContendedRounds with HeapOptions::pack_allocations, else 0). Set once.
  int contended_rounds;
  UntypedCounters untyped;                 ///< malloc/free counters (untyped_memory.cuh)
  EnumerationClock enumeration_clock;      ///< parallel_do's enumeration time on cuda, when timed
};

/// Result of a slot reservation: the block and the slots reserved in it (slots == 0: failed).
struct Reservation {
  std::uint64_t block;
  std::uint64_t slots;
};

}  // namespace detail

/// @brief Device/host-thread handle of a heap over @p Classes. Copy it into kernels; it owns nothing.
template <class... Classes>
class HeapView {
 public:
  using Layout = HeapLayout<Classes...>;
  static constexpr int kClassCount = Layout::kClassCount;
  /// Untyped memory's size classes in blocks of this heap (untyped_layout.cuh).
  using Untyped = detail::UntypedLayout<Layout::kDataBytes>;
  /// Bitmaps: free, then allocated[c], active[c], defrag[c] for every class c, then untyped memory's.
  static constexpr int kUntypedBitmapBase = 1 + 3 * kClassCount;
  static constexpr int kBitmapCount = kUntypedBitmapBase + Untyped::kBitmapCount;

  template <class T>
  static constexpr int class_id = Layout::template index_of<T>;

  // ---- set up by the owning Heap ------------------------------------------------------------------
  BlockHeader* headers = nullptr;
  std::uint64_t data_base = 0;     ///< address of block 0's data segment
  std::uint64_t block_count = 0;
  std::uint64_t* bitmap_words = nullptr;
  BitmapShape bitmap_shape{};
  detail::HeapRuntimeState* state = nullptr;

  // ---- bitmaps ----------------------------------------------------------------------------------------
  SOAHEAP_HD BitmapView bitmap(int index) const {
    return BitmapView(bitmap_words + static_cast<std::uint64_t>(index) * bitmap_shape.total_words, bitmap_shape);
  }
  SOAHEAP_HD BitmapView free_blocks() const { return bitmap(0); }
  SOAHEAP_HD BitmapView allocated_blocks(int class_index) const { return bitmap(1 + class_index); }
  SOAHEAP_HD BitmapView active_blocks(int class_index) const { return bitmap(1 + kClassCount + class_index); }
  SOAHEAP_HD BitmapView defrag_candidates(int class_index) const { return bitmap(1 + 2 * kClassCount + class_index); }

  // ---- per-class constants, indexable at runtime -------------------------------------------------
  SOAHEAP_HD static int capacity_of_class(int class_index) {
    int result = 0;
    int index = 0;
    ((result = (index++ == class_index) ? Layout::template capacity<Classes> : result), ...);
    return result;
  }
  SOAHEAP_HD static std::uint64_t full_mask(int class_index) { return detail::low_bits(capacity_of_class(class_index)); }
  SOAHEAP_HD int defrag_threshold(int class_index) const {
    return static_cast<int>(detail::atomic_load(reinterpret_cast<const std::uint32_t*>(&state->defrag_threshold[class_index])));
  }

  // ---- block accounting --------------------------------------------------------------------------------
  /// Called by whoever takes a block out of the free bitmap.
  SOAHEAP_HD void count_block_taken() const {
    detail::atomic_max(&state->peak_allocated_blocks, detail::atomic_fetch_add(&state->allocated_blocks, 1) + 1);
  }
  /// Called by whoever returns a block to the free bitmap.
  SOAHEAP_HD void count_block_freed() const { detail::atomic_fetch_add(&state->allocated_blocks, ~std::uint64_t{0}); }

  // ---- addresses -------------------------------------------------------------------------------------
  SOAHEAP_HD std::uint64_t data_address(std::uint64_t block) const { return data_base + block * Layout::kDataBytes; }
  SOAHEAP_HD std::uint64_t block_of(std::uint64_t object_bits) const {
    return (detail::data_address_of(object_bits) - data_base) / Layout::kDataBytes;
  }
  template <class C>
  SOAHEAP_HD C* make_pointer(std::uint64_t block, int slot) const {
    return reinterpret_cast<C*>(
        detail::make_object_pointer(data_address(block), slot, Layout::template capacity<C>, class_id<C>));
  }
  /// make_pointer for a loop over the slots of one block (see detail::make_object_pointer_for_slot).
  template <class C>
  SOAHEAP_HD C* make_slot_pointer(std::uint64_t block, int slot) const {
    return reinterpret_cast<C*>(
        detail::make_object_pointer_for_slot(data_address(block), slot, Layout::template capacity<C>, class_id<C>));
  }
  SOAHEAP_HD std::uint64_t make_pointer_bits(std::uint64_t block, int slot, int class_index) const {
    return detail::make_object_pointer(data_address(block), slot, capacity_of_class(class_index), class_index);
  }

  // ---- errors ----------------------------------------------------------------------------------------
  /// Records @p kind unless an earlier error is still unreported (the first error is the useful one).
  SOAHEAP_HD void record_error(HeapErrorKind kind, int class_index, std::uint64_t block) const {
    if (detail::atomic_cas(&state->error, 0, detail::encode_error(kind, class_index, block)) == 0 &&
        state->error_signal != nullptr) {
      // A plain store (no atomics on host memory); the host reads it only after the kernel ended.
      *static_cast<volatile std::uint64_t*>(state->error_signal) = 1;
#if SOAHEAP_DEVICE_CODE
      __threadfence_system();
#endif
    }
  }

  // ---- allocation ------------------------------------------------------------------------------------
  /// @brief Reserves a slot for a new T (what `new (heap) T(...)` calls); nullptr when out of memory.
  template <class T>
  SOAHEAP_HD void* allocate_slot() const {
    static_assert(class_id<T> >= 0, "soaheap: this class is not one of the heap's classes; add it to the heap's class list");
    static_assert(!T::kAbstract, "soaheap: cannot allocate an object of an abstract class; allocate a concrete subclass");
#if SOAHEAP_DEVICE_CODE
    return allocate_slot_in_warp<T>();
#else
    const std::uint32_t seed = detail::mix_seed((std::uint64_t{detail::ThreadPool::current_worker()} << 32) ^
                                                next_host_seed());
    const detail::Reservation reservation = reserve_slots<T>(1, seed);
    if (reservation.slots == 0) return nullptr;
    return make_pointer<T>(reservation.block, detail::lowest_set_bit(reservation.slots));
#endif
  }

  /// @brief allocate_slot for the threads where @p wanted holds, nullptr for the others (what
  /// soaheap::create_if calls). Every lane of a warp calls it together: when the whole warp is at
  /// the call, one lane reserves the slots of all lanes that want one, as `new` does for a whole
  /// warp; otherwise each lane that wants a slot reserves its own, as `new` in a branch does.
  template <class T>
  SOAHEAP_HD void* allocate_slot_if(bool wanted) const {
    static_assert(class_id<T> >= 0, "soaheap: this class is not one of the heap's classes; add it to the heap's class list");
    static_assert(!T::kAbstract, "soaheap: cannot allocate an object of an abstract class; allocate a concrete subclass");
#if SOAHEAP_DEVICE_CODE
    if (__activemask() == detail::kFullWarp) return allocate_slots_for_warp<T>(__ballot_sync(detail::kFullWarp, wanted));
    // Not allocate_slot: its whole-warp path would be a third copy of reserve_slots in the caller's
    // kernel (each copy costs registers there; game-of-life's Candidate::update went from 56 to 118).
    return wanted ? allocate_own_slot<T>(__activemask()) : nullptr;
#else
    return wanted ? allocate_slot<T>() : nullptr;
#endif
  }

  /// @brief allocate_slot_if that first tries the block of @p near, an object of class T that stays
  /// alive during the call: a free slot there costs one atomic and no search, and puts the new
  /// object next to @p near in memory. The threads whose try failed (block full, or @p near of
  /// another class) then allocate together through allocate_slot_if. Every lane of a warp calls it.
  template <class T>
  SOAHEAP_HD void* allocate_slot_if_near(bool wanted, const T* near) const {
    void* slot = nullptr;
    if (wanted && near != nullptr) slot = try_allocate_in_block_of<T>(near);
    void* const elsewhere = allocate_slot_if<T>(wanted && slot == nullptr);
    return slot != nullptr ? slot : elsewhere;
  }

  /// A slot in the block of @p near for a new T, or nullptr when that block has none.
  template <class T>
  SOAHEAP_HD void* try_allocate_in_block_of(const T* near) const {
    const std::uint64_t bits = reinterpret_cast<std::uint64_t>(near);
    if (detail::class_id_of(bits) != class_id<T>) return nullptr;  // a subclass's block
    const std::uint64_t block = block_of(bits);
    const std::uint64_t allocation = detail::atomic_load(&headers[block].allocation);
    if ((~allocation & full_mask(class_id<T>)) == 0) return nullptr;  // full: no refresh, no search
    const std::uint64_t slots = try_reserve_in_block(block, class_id<T>, 1, detail::mix_seed(bits));
    if (slots == 0) return nullptr;
    return make_pointer<T>(block, detail::lowest_set_bit(slots));
  }

  /// @brief Finds a block of class T and reserves up to @p wanted slots in it (at least one unless the
  /// heap is out of memory, which is then recorded). The first lane of a whole warp calls it for the
  /// warp; a lane of a diverged warp calls it for itself with @p rank, its position among the lanes
  /// of its warp allocating with it (a hint, never needed for correctness): with the warp's @p seed
  /// they look at the same blocks, the lane aims at the rank-th free slot, and in the first rounds
  /// it leaves starting a new block to rank 0. Host threads pass rank -1 (no hint).
  template <class T>
  SOAHEAP_HD detail::Reservation reserve_slots(int wanted, std::uint32_t seed, int rank = -1) const {
    constexpr int kClass = class_id<T>;
    constexpr int kCapacity = Layout::template capacity<T>;
    const BitmapView active = active_blocks(kClass);
    int empty_rounds = 0;
    int contended_rounds = 0;
    for (int round = 0; round < detail::kMaxAllocationRounds; ++round) {
      const std::uint32_t round_seed = seed + static_cast<std::uint32_t>(round) * 0x9e3779b9u;
      bool contended = false;  // a lookup found a block, but it had no room left
      for (int lookup = 0; lookup < detail::kActiveLookupAttempts; ++lookup) {
        const std::uint64_t block = active.try_find_set(round_seed + static_cast<std::uint32_t>(lookup) * 0x632be5abu);
        if (block == BitmapView::kNotFound) {
          // A miss is often only a summary bit whose word below was just emptied by blocks filling
          // up: look again. Giving up the round here started a new block whenever many threads
          // filled blocks at once (DynaSOAr's traffic: Cell blocks 55% full, out of memory).
          if (active.appears_empty()) break;
          continue;
        }
        const std::uint64_t slots = try_reserve_in_block(block, kClass, wanted, round_seed + lookup, rank);
        if (slots != 0) return {block, slots};
        contended = true;
      }
      if (contended && rank >= 0 && contended_rounds < state->contended_rounds) {
        detail::back_off(contended_rounds++);
        continue;
      }
      if (rank > 0 && round < detail::kFollowerRounds) {
        detail::back_off(round);  // rank 0 is probably publishing a block with room for us
        continue;
      }
#if !SOAHEAP_DEVICE_CODE
      // A host worker that takes a block can be descheduled before the block shows in the active
      // bitmap; meanwhile every other worker would start a block of its own (under ThreadSanitizer
      // on two cores: Ion blocks 12.5 % full until the heap ran out). Give a block in transit the
      // time to appear first, a few growing pauses, then start one anyway.
      if (round < detail::kFollowerRounds && detail::atomic_load(&state->blocks_in_transit) != 0) {
        detail::back_off(round);
        continue;
      }
#endif
      // Slow path: start a new block of class T.
      detail::atomic_fetch_add(&state->blocks_in_transit, 1);
      const std::uint64_t block = free_blocks().clear_any(round_seed);
      if (block != BitmapView::kNotFound) {
        const std::uint64_t slots = detail::low_bits(wanted < kCapacity ? wanted : kCapacity);
        initialize_block(block, kClass, slots);
        detail::atomic_fetch_add(&state->blocks_in_transit, ~std::uint64_t{0});  // -1
        count_block_taken();  // after publishing: keeps the in-transit window short
        return {block, slots};
      }
      detail::atomic_fetch_add(&state->blocks_in_transit, ~std::uint64_t{0});
      // Out of memory only if no block is on its way to becoming active either (its slots would
      // otherwise be missed by a thread that looked in the short window before it was published).
      // Many starving threads keep that counter above zero for each other, so after a few rounds
      // that all found nothing the answer stands anyway: publishing a block takes far less time.
      // Between such rounds the thread backs off, growing the pause, so that a publisher that was
      // descheduled (host threads on few cores) gets the time to finish before the answer stands.
      // A failed clear_any with free blocks left only lost races to other takers: try again.
      if (active.appears_empty() && free_blocks().appears_empty() && out_of_memory_stands(empty_rounds)) {
        record_error(HeapErrorKind::out_of_memory, kClass, block_count);
        return {0, 0};
      }
    }
    record_error(HeapErrorKind::allocation_starved, kClass, block_count);
    return {0, 0};
  }

  /// @brief Called after a round that found the heap empty (no block of the class with room, none
  /// free): true once the answer stands (see reserve_slots); otherwise it backs off, a little
  /// longer each time, and the caller tries again. Typed and untyped memory share it.
  SOAHEAP_HD bool out_of_memory_stands(int& empty_rounds) const {
    ++empty_rounds;
    if ((empty_rounds >= detail::kOutOfMemoryEmptyChecks && detail::atomic_load(&state->blocks_in_transit) == 0) ||
        empty_rounds >= detail::kOutOfMemoryConfirmations)
      return true;
    detail::back_off(empty_rounds);
    return false;
  }

  // ---- deallocation ----------------------------------------------------------------------------------
  /// @brief Runs the destructor of @p object's runtime class and frees its slot (what soaheap::destroy calls).
  template <class T>
  SOAHEAP_HD void destroy_object(T* object) const {
    static_assert(is_managed_v<T>, "soaheap::destroy needs a pointer to a managed class");
    if (object == nullptr) return;
    const std::uint64_t bits = reinterpret_cast<std::uint64_t>(object);
    const int runtime_class = detail::class_id_of(bits);
    const std::uint64_t address = detail::data_address_of(bits);
    const int slot = detail::slot_of(bits);
    if (runtime_class >= kClassCount || address < data_base || address >= data_address(block_count) ||
        (address - data_base) % Layout::kDataBytes != 0 || slot >= capacity_of_class(runtime_class)) {
      record_error(HeapErrorKind::destroy_of_foreign_pointer, runtime_class < kClassCount ? runtime_class : 0xff,
                   block_count);
      return;
    }
    const std::uint64_t block = block_of(bits);
#ifdef SOAHEAP_CHECKED
    if (detail::atomic_load(&headers[block].class_id) != static_cast<std::uint32_t>(runtime_class) ||
        !allocated_blocks(runtime_class).get(block)) {
      record_error(HeapErrorKind::destroy_of_foreign_pointer, runtime_class, block);
      return;
    }
#endif
    run_destructor(object, runtime_class);
    // Release: the object's field stores (constructor, methods, destructor) must be visible before
    // its slot is, or the next owner's constructor could be overwritten by a store still on its way.
    detail::release_fence();
    // A running parallel_do keeps its own snapshot (the block list): only `this` may be destroyed
    // among the objects it visits, and its visit has begun, so nothing here needs to tell it.
    const std::uint64_t slot_mask = std::uint64_t{1} << slot;
    if (!release_slots(block, slot_mask)) record_error(HeapErrorKind::destroy_of_free_slot, runtime_class, block);
  }

  /// @brief Frees @p slots of @p block (destroy, and rollback of a reservation in a block that
  /// changed class). Returns false when some of the slots were not reserved.
  SOAHEAP_HD bool release_slots(std::uint64_t block, std::uint64_t slots) const {
    // The class cannot change while we still hold slots, so read it before letting go of them.
    const std::uint32_t header_class = detail::atomic_load(&headers[block].class_id);
    if (header_class >= static_cast<std::uint32_t>(kClassCount))
      return detail::release_untyped_chunks(*this, block, header_class, slots);  // untyped chunks now
    const int block_class = static_cast<int>(header_class);
    const std::uint64_t before = detail::atomic_fetch_and(&headers[block].allocation, ~slots);
    const std::uint64_t after = before & ~slots;
    if (before == detail::kInvalidatedBitmap && full_mask(block_class) != detail::kInvalidatedBitmap) {
      // The block is free: a destroy of an object whose block was emptied and retired. Put the
      // word back before an allocator can take the cleared bit, and report the double destroy.
      // (For capacity 64 all ones is also a full block, and no bit read after the release can
      // tell the two apart without racing a legitimate retirement: SOAHEAP_CHECKED checks those.)
      detail::atomic_cas(&headers[block].allocation, after, detail::kInvalidatedBitmap);
      return false;
    }
    if (after == 0) {
      try_retire_block(block, block_class);
    } else {
      const int capacity = capacity_of_class(block_class);
      const int threshold = defrag_threshold(block_class);
      const int fill_before = detail::popcount(before & full_mask(block_class));
      const int fill_after = detail::popcount(after & full_mask(block_class));
      if (fill_before == capacity || (fill_before > threshold && fill_after <= threshold))
        refresh_block_state(block, block_class);
    }
    return (before & slots) == slots;
  }

  // ---- block state maintenance -----------------------------------------------------------------------
  /// @brief Makes active[c] and defrag[c] agree with the block's current fill level. Repeats until
  /// the fill level did not change in a way that matters while it wrote, so concurrent callers
  /// converge on the state of the last change (no waiting on other threads involved).
  SOAHEAP_HD void refresh_block_state(std::uint64_t block, int class_index) const {
    const BitmapView active = active_blocks(class_index);
    const BitmapView candidates = defrag_candidates(class_index);
    bool want_active = false;
    bool want_candidate = false;
    desired_block_state(block, class_index, want_active, want_candidate);
    for (;;) {
      // Keep defrag ⇒ active ⇒ allocated on the way up and down.
      if (want_active) {
        active.set(block);
        candidates.assign(block, want_candidate);
      } else {
        candidates.clear(block);
        active.clear(block);
      }
      detail::memory_fence();
      bool now_active = false;
      bool now_candidate = false;
      desired_block_state(block, class_index, now_active, now_candidate);
      if (now_active == want_active && now_candidate == want_candidate) return;
      want_active = now_active;
      want_candidate = now_candidate;
    }
  }

  /// What active[c] / defrag[c] should say about @p block right now.
  SOAHEAP_HD void desired_block_state(std::uint64_t block, int class_index, bool& active, bool& candidate) const {
    const std::uint32_t block_class = detail::atomic_load(&headers[block].class_id);
    const std::uint64_t allocation = detail::atomic_load(&headers[block].allocation);
    if (block_class != static_cast<std::uint32_t>(class_index) || allocation == detail::kInvalidatedBitmap) {
      active = candidate = false;
      return;
    }
    const int fill = detail::popcount(allocation & full_mask(class_index));
    active = fill < capacity_of_class(class_index);
    candidate = fill <= defrag_threshold(class_index);
  }

  /// Starts block @p block (just taken from the free bitmap) as a block of @p class_index with @p slots reserved.
  SOAHEAP_HD void initialize_block(std::uint64_t block, int class_index, std::uint64_t slots) const {
    BlockHeader& header = headers[block];
    detail::atomic_store(&header.class_id, static_cast<std::uint32_t>(class_index));
    detail::atomic_store(&header.iteration, 0);
    // Threads that still hold this block from an earlier life must see the new class before they
    // can see free slots (DynaSOAr Alg. 8); they then roll their reservation back. Their reservation
    // is an acquire RMW on the allocation bitmap, so release ordering suffices here.
    detail::release_fence();
    detail::atomic_store(&header.allocation, slots);
    detail::release_fence();
    allocated_blocks(class_index).set(block);
    refresh_block_state(block, class_index);
  }

  /// Called by whoever emptied @p block: invalidate it (all bits to 1 in one CAS from 0, so no
  /// reservation can succeed any more) and return it to the free bitmap. If someone reserved a slot
  /// in the meantime the CAS fails and the block lives on.
  SOAHEAP_HD void try_retire_block(std::uint64_t block, int class_index) const {
    if (detail::atomic_cas(&headers[block].allocation, 0, detail::kInvalidatedBitmap) != 0) {
      refresh_block_state(block, class_index);
      return;
    }
    defrag_candidates(class_index).clear(block);
    active_blocks(class_index).clear(block);
    allocated_blocks(class_index).clear(block);
    count_block_freed();
    detail::memory_fence();
    free_blocks().set(block);
  }

  /// Reserves up to @p wanted free slots of @p block for class @p class_index; returns them (0: none).
  /// @p aim: see choose_slots.
  SOAHEAP_HD std::uint64_t try_reserve_in_block(std::uint64_t block, int class_index, int wanted,
                                                std::uint32_t seed, int aim = -1) const {
    BlockHeader& header = headers[block];
    const std::uint64_t full = full_mask(class_index);
    for (;;) {
      const std::uint64_t allocation = detail::atomic_load(&header.allocation);
      const std::uint64_t free_slots = ~allocation & full;
      if (free_slots == 0 || allocation == detail::kInvalidatedBitmap) {
        // Full, free, or another class's: the active bit we followed is stale.
        refresh_block_state(block, class_index);
        return 0;
      }
      const std::uint64_t chosen = choose_slots(free_slots, wanted, seed, aim);
      // Acquire: if the block was restarted for another class, the class id below is the new one.
      const std::uint64_t before = detail::atomic_fetch_or_acquire(&header.allocation, chosen);
      const std::uint64_t reserved = chosen & ~before;
      if (reserved == 0) continue;  // others were faster; they made progress
      if (detail::atomic_load(&header.class_id) != static_cast<std::uint32_t>(class_index)) {
        // The block was retired and restarted for another class since we found it (DynaSOAr's
        // rollback case); nothing was constructed yet, so giving the slots back is enough.
        release_slots(block, reserved);
        return 0;
      }
      const int capacity = capacity_of_class(class_index);
      const int threshold = defrag_threshold(class_index);
      const int fill_before = detail::popcount(before & full);
      const int fill_after = detail::popcount((before | reserved) & full);
      if (fill_after == capacity || (fill_before <= threshold && fill_after > threshold))
        refresh_block_state(block, class_index);
      return reserved;
    }
  }

  /// Up to @p wanted set bits of @p free_slots, starting at a seed-dependent position.
  /// With @p aim >= 0 (a lane of a diverged warp, wanted = 1): the aim-th free slot, modulo their
  /// number, so that lanes of one warp reserving in one block rarely collide.
  SOAHEAP_HD static std::uint64_t choose_slots(std::uint64_t free_slots, int wanted, std::uint32_t seed, int aim = -1) {
    if (aim >= 0) return std::uint64_t{1} << detail::nth_set_bit(free_slots, aim % detail::popcount(free_slots));
    if (wanted <= 1) return std::uint64_t{1} << detail::pick_set_bit(free_slots, seed);
    if (detail::popcount(free_slots) <= wanted) return free_slots;
    // Several slots (a warp's reservation): the lowest free ones at or above a seed-dependent slot,
    // then wrapping around, so that warps reserving in one block at once do not all go for the same
    // slots and retry.
    const int start = static_cast<int>(seed % 64u);
    const auto rotate_right = [](std::uint64_t bits, int shift) {
      return shift == 0 ? bits : (bits >> shift) | (bits << (64 - shift));
    };
    std::uint64_t chosen = 0;
    std::uint64_t remaining = rotate_right(free_slots, start);
    for (int taken = 0; taken < wanted; ++taken) {
      const std::uint64_t lowest = remaining & (~remaining + 1);
      chosen |= lowest;
      remaining ^= lowest;
    }
    return rotate_right(chosen, (64 - start) & 63);
  }

  // ---- enumeration inside kernels ----------------------------------------------------------------
  /// @brief Calls f(C*) for every live object of T and its subclasses, sequentially in the calling thread.
  /// A full block is a counted loop over its slots (unrolled four times in device code), so the
  /// loads of the next objects' fields need not wait for the bit scan that finds them, and can be in
  /// flight together where the body lets them: on an H100, nbody's force loop (16 k bodies, four
  /// warps per SM, latency-bound) ran 7 % faster, DynaSOAr's nbody through the shim 6 %
  /// (docs/performance.md). Partly filled blocks keep the bit scan.
  template <class T, class Function>
  SOAHEAP_HD void for_each_object(Function&& f) const {
    for_each_live_slot<T>([&](auto class_tag, std::uint64_t block, int slot, auto full) {
      using C = detail::tag_type_t<decltype(class_tag)>;
      if constexpr (decltype(full)::value) f(static_cast<T*>(make_pointer<C>(block, slot)));
      else f(static_cast<T*>(make_slot_pointer<C>(block, slot)));
    });
  }

  /// @brief for_each_object that also hands f the values of the fields @p Members (pointers to field
  /// members of T or a base of T, e.g. `&Body::pos_x`): f(T*, values...). Each value is read from
  /// its block's SOA array at an offset known at compile time for the visited concrete class, so
  /// the loop indexes arrays like hand-written SOA code. Reading the same fields through the
  /// pointer (`other->pos_x`) decodes the pointer's tag again per field inside such a loop, about a
  /// dozen integer instructions each that nvcc does not fold (docs/performance.md, "fourth pass").
  /// Partly filled blocks are walked slot by slot with a test of each slot's bit rather than by a
  /// bit scan: the loop then unrolls and the loads of the next objects need not wait for the scan
  /// (collision on an H100: 3.83 s with the bit scan, 3.46 s with this).
  template <class T, auto... Members, class Function>
  SOAHEAP_HD void for_each_object_with(Function&& f) const {
    for_each_live_slot<T, true>([&](auto class_tag, std::uint64_t block, int slot, auto full) {
      using C = detail::tag_type_t<decltype(class_tag)>;
      T* const object = decltype(full)::value ? static_cast<T*>(make_pointer<C>(block, slot))
                                              : static_cast<T*>(make_slot_pointer<C>(block, slot));
      f(object, field_value<C, Members>(block, slot)...);
    });
  }

  /// @brief The value of field @p Member of the object in @p slot of @p block, a block of concrete class C.
  template <class C, auto Member>
  SOAHEAP_HD auto field_value(std::uint64_t block, int slot) const {
    using FieldType = typename detail::member_pointer_traits<decltype(Member)>::field;
    using Owner = typename detail::member_pointer_traits<decltype(Member)>::owner;
    using Value = typename FieldType::value_type;
    static_assert(std::is_base_of_v<Owner, C>, "soaheap: the field is not a field of the visited class");
    static_assert(!is_soaheap_array<Value>::value, "soaheap: array fields are read through the object pointer");
    // Inherited fields come first, so the field's index among Owner's fields is its index in C too.
    constexpr std::uint64_t kOffset =
        detail::soa_array_offset<all_field_types_t<C>, FieldType::global_index()>(Layout::template capacity<C>);
    // Generic loads, not global ones (`__builtin_assume(__isGlobal(...))` as in Field::address()):
    // collision on an H100 ran 3.83 s with these and 4.19 s with global loads.
    const Value* const array = reinterpret_cast<const Value*>(data_address(block) + kOffset);
    return array[slot];
  }

  /// Calls f(type_tag<C>, block, slot, full) for every live object of T and its subclasses, C its
  /// concrete class and full a std::bool_constant telling whether its block is full (the counted
  /// loop) or partly filled (a bit scan; with @p kTestEverySlot a counted loop that tests each
  /// slot's bit, as a hand-written loop tests an "alive" flag); see for_each_object.
  template <class T, bool kTestEverySlot = false, class Function>
  SOAHEAP_HD void for_each_live_slot(Function&& f) const {
    for_each_concrete_subclass<T>([&](auto class_tag) {
      using C = detail::tag_type_t<decltype(class_tag)>;
      const BitmapView allocated = allocated_blocks(class_id<C>);
      const std::uint64_t words = bitmap_shape.level_words[0];
      for (std::uint64_t w = 0; w < words; ++w) {
        std::uint64_t blocks = detail::atomic_load(&allocated.word(0, w));
        while (blocks != 0) {
          const int bit = detail::lowest_set_bit(blocks);
          blocks &= blocks - 1;
          const std::uint64_t block = w * 64 + static_cast<std::uint64_t>(bit);
          std::uint64_t objects = detail::atomic_load(&headers[block].allocation);
          objects &= full_mask(class_id<C>);
          if (objects == full_mask(class_id<C>)) {
SOAHEAP_UNROLL_4
            for (int slot = 0; slot < Layout::template capacity<C>; ++slot) f(class_tag, block, slot, std::true_type{});
            continue;
          }
          if constexpr (kTestEverySlot) {
SOAHEAP_UNROLL_4
            for (int slot = 0; slot < Layout::template capacity<C>; ++slot)
              if ((objects >> slot) & 1) f(class_tag, block, slot, std::false_type{});
          } else {
            while (objects != 0) {
              const int slot = detail::lowest_set_bit(objects);
              objects &= objects - 1;
              f(class_tag, block, slot, std::false_type{});
            }
          }
        }
      }
    });
  }

  /// Calls f(type_tag<C>) for each non-abstract class C of the heap that is T or derives from T.
  template <class T, class Function>
  SOAHEAP_HD static void for_each_concrete_subclass(Function&& f) {
    (
        [&] {
          if constexpr (std::is_base_of_v<T, Classes> && !Classes::kAbstract) f(type_tag<Classes>{});
        }(),
        ...);
  }

  template <class C>
  struct type_tag {
    using type = C;
  };

 private:
#if SOAHEAP_DEVICE_CODE
  /// Allocation request coalescing (DynaSOAr's warp-aggregated reservation): when the whole warp
  /// allocates a T together, lane 0 reserves slots for all 32 lanes, block by block, and shuffles
  /// each round's reservation to the others.
  ///
  /// Invariant (the ghost-objects bug, issue 16): a reservation made by one lane for others is
  /// handed over only within a group that no other lane of the warp can join while the handover
  /// runs, and the only such group is the whole warp converged at the call. A smaller group (the
  /// lanes that reach `new` in one branch, or at one moment) is not safe: the compiler may lower
  /// the group's shuffles as if the lane mask were the same for every lane that executes them
  /// (ptxas does so for an out-of-line `operator new`, seen on an H100 with CUDA 13: one lane's
  /// mask moved to a uniform register, one branch-if-diverged check, then unmasked shuffles). When
  /// two groups of one warp then reconverge in that code, a follower of one group reads the
  /// registers of a leader that is not there: its `new` returns nullptr with no error recorded,
  /// while the slot reserved for it stays allocated with no owner. So every lane outside a
  /// converged whole warp reserves its own slot, and only its own atomics decide what it gets.
  /// The lanes that allocate at the same moment still act together where that needs no handover:
  /// they share the warp's seed (so they look at the same blocks), aim at different slots by their
  /// rank among them, and for a few rounds leave starting a new block to the first of them, so
  /// that a diverged warp's objects land side by side. Seed and rank are hints: a wrong one costs
  /// a retry, never a slot.
  template <class T>
  __device__ void* allocate_slot_in_warp() const {
    const unsigned lanes = __activemask();
    if (lanes != detail::kFullWarp) return allocate_own_slot<T>(lanes);
    return allocate_slots_for_warp<T>(detail::kFullWarp);
  }

  /// A lane of a diverged warp (@p lanes: those at the call) reserves its own slot. The lanes'
  /// common seed and ranks only steer them to the same blocks and apart in them.
  template <class T>
  __device__ void* allocate_own_slot(unsigned lanes) const {
    const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const int rank = detail::popcount(lanes & detail::lanes_below());
    const detail::Reservation reservation =
        reserve_slots<T>(1, detail::mix_seed((thread / 32) ^ (std::uint64_t{lanes} << 32)), rank);
    if (reservation.slots == 0) return nullptr;  // out of memory, recorded by reserve_slots
    return make_pointer<T>(reservation.block, detail::lowest_set_bit(reservation.slots));
  }

  /// The whole warp, converged at the call, allocates one T for each lane in @p wanting (the same
  /// mask in every lane): lane 0 reserves them, block by block, and shuffles each round's
  /// reservation to the others. Lanes outside @p wanting get nullptr.
  template <class T>
  __device__ void* allocate_slots_for_warp(unsigned wanting) const {
    const int count = detail::popcount(wanting);
    if (count == 0) return nullptr;
    const std::uint64_t thread = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::uint64_t clock = static_cast<std::uint64_t>(clock64()) << 20;
    const int lane = detail::lane_id();
    const bool wants = ((wanting >> lane) & 1u) != 0;
    const int index = detail::popcount(wanting & detail::lanes_below());  // among the lanes that want one
    std::uint32_t seed = detail::mix_seed((thread / 32) ^ clock);
    std::uint64_t pointer = 0;
    int served = 0;
    while (served < count) {
      detail::Reservation reservation{0, 0};
      if (lane == 0) reservation = reserve_slots<T>(count - served, seed);
      const std::uint64_t block = __shfl_sync(detail::kFullWarp, reservation.block, 0);
      const std::uint64_t slots = __shfl_sync(detail::kFullWarp, reservation.slots, 0);
      if (slots == 0) break;  // out of memory: the remaining lanes get nullptr
      const int granted = detail::popcount(slots);
      if (wants && index >= served && index < served + granted)
        pointer = reinterpret_cast<std::uint64_t>(make_pointer<T>(block, detail::nth_set_bit(slots, index - served)));
      served += granted;
      seed = detail::mix_seed(seed + 1);
    }
    return reinterpret_cast<void*>(pointer);
  }

#else
  static std::uint64_t next_host_seed() {
    static thread_local std::uint64_t counter = 0;
    return ++counter;
  }
#endif

  template <class T>
  SOAHEAP_HD static void run_destructor(T* object, int runtime_class) {
    int index = 0;
    (
        [&] {
          if (index++ != runtime_class) return;
          if constexpr (std::is_base_of_v<T, Classes> && !std::is_trivially_destructible_v<Classes>) {
            static_cast<Classes*>(object)->~Classes();
          }
        }(),
        ...);
  }
};

/// @brief Destroys @p object (of any managed class of @p heap, found through the pointer tag).
/// @param heap a Heap or its HeapView
template <class HeapLike, class T>
SOAHEAP_HD void destroy(const HeapLike& heap, T* object) {
  heap.destroy_object(object);
}

/// @brief Collective `new (heap) T(args...)`: creates a T in the threads where @p condition holds
/// and returns nullptr in the others (and where the heap is out of memory, which the heap reports
/// at its next host call, as for `new`). Call it from every thread of the warp together, in code
/// that all of them reach, with the branch's condition as @p condition — not inside the branch:
/// a whole warp at the call then reserves the slots of all its new objects in one go, where `new`
/// in a branch must let each lane reserve its own (docs/architecture.md, "Warp aggregation").
/// @param heap a Heap (host backend) or its HeapView
template <class T, class HeapLike, class... Args>
SOAHEAP_HD T* create_if(const HeapLike& heap, bool condition, Args&&... args) {
  void* const slot = heap.template allocate_slot_if<T>(condition);
  if (slot == nullptr) return nullptr;
  return ::new (slot) T(static_cast<Args&&>(args)...);
}

/// @brief create_if that puts each new object in the block of @p near (an object of class T, alive
/// during the call, e.g. the parent creating it) when that block has a free slot: one atomic
/// instead of a search, and the new object next to @p near in memory. Called like create_if.
template <class T, class HeapLike, class... Args>
SOAHEAP_HD T* create_if_near(const HeapLike& heap, bool condition, const T* near, Args&&... args) {
  void* const slot = heap.template allocate_slot_if_near<T>(condition, near);
  if (slot == nullptr) return nullptr;
  return ::new (slot) T(static_cast<Args&&>(args)...);
}

/// @brief Calls `(object->*method)(args...)` on every live object of T and its subclasses,
/// sequentially in the calling thread (inside a kernel or a parallel_do method).
template <class T, class HeapLike, class Method, class... Args>
SOAHEAP_HD void device_do(const HeapLike& heap, Method method, Args&&... args) {
  heap.template for_each_object<T>([&](T* object) { (object->*method)(args...); });
}

/// @brief Calls `body(object, values...)` on every live object of T and its subclasses,
/// sequentially in the calling thread, where values are the object's fields @p Members
/// (`soaheap::device_do_fields<Body, &Body::pos_x, &Body::pos_y>(heap, [&](Body* other, float x,
/// float y) { ... })`). The fields are read like arrays of a hand-written SOA program: the inner
/// loop of an all-pairs step (collision, n-body) without a field-address decode per visited
/// object (HeapView::for_each_object_with).
template <class T, auto... Members, class HeapLike, class Body>
SOAHEAP_HD void device_do_fields(const HeapLike& heap, Body&& body) {
  heap.template for_each_object_with<T, Members...>(body);
}

}  // namespace soaheap

// Untyped memory shares the block protocol: release_slots hands blocks of untyped chunks to it.
#include <soaheap/core/untyped_memory.cuh>
