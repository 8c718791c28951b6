#pragma once
/// @file heap_internals.cuh
/// @brief `HeapInternals<Classes...>`: the private implementation behind HeapView — the heap's
///        block headers, bitmaps and runtime state, the typed side of the reservation core
///        (slot_reservation.cuh), block-state upkeep, and enumeration. Users never name it; the
///        defrag, profiler and distributed layers reach it through the one access point
///        `soaheap::detail::internals(heap_or_view)` (heap_view.cuh).

#include <soaheap/base/object_pointer.cuh>
#include <soaheap/base/portability.cuh>
#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/detail/runtime_state.cuh>
#include <soaheap/core/detail/slot_reservation.cuh>
#include <soaheap/core/detail/warp_reservation.cuh>
#include <soaheap/core/heap_layout.cuh>
#include <soaheap/core/thread_pool.hpp>
#include <soaheap/core/untyped_layout.cuh>
#include <soaheap/reflection/field.cuh>

#include <cstdint>
#include <type_traits>

namespace soaheap::detail {

/// @brief The heap's state as kernels see it, and every algorithm over it. Trivially copyable;
/// owns nothing (the owning Heap sets it up).
template <class... Classes>
struct HeapInternals {
  using Layout = HeapLayout<Classes...>;
  static constexpr int kClassCount = Layout::kClassCount;
  /// Untyped memory's size classes in blocks of this heap (untyped_layout.cuh).
  using Untyped = UntypedLayout<Layout::kDataBytes>;
  /// Bitmaps: free, then allocated[c], active[c], defrag[c] for every class c, then untyped memory's.
  static constexpr int kUntypedBitmapBase = 1 + 3 * kClassCount;
  static constexpr int kBitmapCount = kUntypedBitmapBase + Untyped::kBitmapCount;
  /// The untyped run bitmap, which keeps level 0 alone (untyped_allocator.cuh, run_blocks).
  static constexpr int kRunBitmap = kUntypedBitmapBase + 2 * Untyped::kClassCount;

  template <class T>
  static constexpr int class_id = Layout::template index_of<T>;

  BlockHeader* headers = nullptr;
  std::uint64_t data_base = 0;     ///< address of block 0's data segment
  std::uint64_t block_count = 0;
  std::uint64_t* bitmap_words = nullptr;  ///< every bitmap, interleaved word by word (BitmapView's stride)
  BitmapShape bitmap_shape{};
  HeapRuntimeState* state = nullptr;

  /// Level-0 words that cover the heap's blocks (the bitmaps' shape is that of the whole reservation).
  SOAHEAP_HD std::uint64_t block_words() const { return (block_count + 63) / 64; }

  // ---- bitmaps ----------------------------------------------------------------------------------------
  SOAHEAP_HD BitmapView bitmap(int index) const {
    return BitmapView(bitmap_words + index, bitmap_shape, kBitmapCount);
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
  SOAHEAP_HD static std::uint64_t full_mask(int class_index) { return low_bits(capacity_of_class(class_index)); }
  SOAHEAP_HD int defrag_threshold(int class_index) const {
    return static_cast<int>(atomic_load(reinterpret_cast<const std::uint32_t*>(&state->defrag_threshold[class_index])));
  }

  // ---- slot classes of the reservation core ----------------------------------------------------------
  /// Managed class @p class_index: one object per slot, defrag candidates kept.
  SOAHEAP_HD SlotClass object_class(int class_index) const {
    return {static_cast<std::uint32_t>(class_index), capacity_of_class(class_index), defrag_threshold(class_index),
            allocated_blocks(class_index), active_blocks(class_index), defrag_candidates(class_index)};
  }
  /// Untyped size class @p size_class: one chunk per slot, never a defrag candidate, current
  /// regions, free blocks and slots picked by rotation (BitPick).
  SOAHEAP_HD SlotClass untyped_class(int size_class) const {
    const BitmapView active = bitmap(kUntypedBitmapBase + 2 * size_class + 1);
    return {Untyped::class_id_of(size_class), Untyped::capacity(size_class), -1,
            bitmap(kUntypedBitmapBase + 2 * size_class), active, active, Untyped::span(size_class),
            region_blocks_for(Untyped::kBlockBytes), BitPick::rotating};
  }
  /// Every block that belongs to an untyped run.
  SOAHEAP_HD BitmapView untyped_run_blocks() const { return bitmap(kRunBitmap); }

  // ---- block accounting --------------------------------------------------------------------------------
  /// Called by whoever takes a block out of the free bitmap.
  SOAHEAP_HD void count_block_taken(std::uint64_t blocks = 1) const {
    atomic_max(&state->peak_allocated_blocks, atomic_fetch_add(&state->allocated_blocks, blocks) + blocks);
  }
  /// Called by whoever returns @p blocks blocks to the free bitmap.
  SOAHEAP_HD void count_block_freed(std::uint64_t blocks = 1) const { atomic_fetch_add(&state->allocated_blocks, ~blocks + 1); }

  // ---- addresses -------------------------------------------------------------------------------------
  SOAHEAP_HD std::uint64_t data_address(std::uint64_t block) const { return data_base + block * Layout::kDataBytes; }
  SOAHEAP_HD std::uint64_t block_of(std::uint64_t object_bits) const {
    return (data_address_of(object_bits) - data_base) / Layout::kDataBytes;
  }
  template <class C>
  SOAHEAP_HD C* make_pointer(std::uint64_t block, int slot) const {
    return reinterpret_cast<C*>(make_object_pointer(data_address(block), slot, Layout::template capacity<C>, class_id<C>));
  }
  /// make_pointer for a loop over the slots of one block (see make_object_pointer_for_slot).
  template <class C>
  SOAHEAP_HD C* make_slot_pointer(std::uint64_t block, int slot) const {
    return reinterpret_cast<C*>(
        make_object_pointer_for_slot(data_address(block), slot, Layout::template capacity<C>, class_id<C>));
  }
  SOAHEAP_HD std::uint64_t make_pointer_bits(std::uint64_t block, int slot, int class_index) const {
    return make_object_pointer(data_address(block), slot, capacity_of_class(class_index), class_index);
  }

  // ---- errors ----------------------------------------------------------------------------------------
  /// Records @p kind unless an earlier error is still unreported (the first error is the useful one).
  SOAHEAP_HD void record_error(HeapErrorKind kind, int class_index, std::uint64_t block) const {
    if (atomic_cas(&state->error, 0, encode_error(kind, class_index, block)) == 0 && state->error_signal != nullptr) {
      // A plain store (no atomics on host memory); the host reads it only after the kernel ended.
      *static_cast<volatile std::uint64_t*>(state->error_signal) = 1;
#if SOAHEAP_DEVICE_CODE
      __threadfence_system();
#endif
    }
  }

  // ---- objects -----------------------------------------------------------------------------------------
  /// @brief Reserves a slot for a new T (what `new (heap) T(...)` calls); nullptr when out of memory.
  template <class T>
  SOAHEAP_HD void* allocate_slot() const {
    return allocate_slot_if<T>(true);
  }

  /// @brief allocate_slot for the threads where @p wanted holds, nullptr for the others (what
  /// soaheap::create_if calls). Every lane of a warp calls it together (reserve_in_warp).
  template <class T>
  SOAHEAP_HD void* allocate_slot_if(bool wanted) const {
    static_assert(class_id<T> >= 0, "soaheap: this class is not one of the heap's classes; add it to the heap's class list");
    static_assert(!T::kAbstract, "soaheap: cannot allocate an object of an abstract class; allocate a concrete subclass");
#if SOAHEAP_DEVICE_CODE
    const LaneSlot slot = reserve_in_warp(*this, object_class(class_id<T>), wanted, class_id<T>);
    if (slot.failure != HeapErrorKind::none) record_error(slot.failure, class_id<T>, block_count);
    return slot.slot < 0 ? nullptr : make_pointer<T>(slot.block, slot.slot);
#else
    if (!wanted) return nullptr;
    const std::uint32_t seed = mix_seed((std::uint64_t{ThreadPool::current_worker()} << 32) ^ next_host_seed());
    const Reservation reservation = reserve(*this, object_class(class_id<T>), 1, seed);
    if (reservation.slots == 0) {
      record_error(reservation.failure, class_id<T>, block_count);
      return nullptr;
    }
    return make_pointer<T>(reservation.block, lowest_set_bit(reservation.slots));
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
    if (class_id_of(bits) != class_id<T>) return nullptr;  // a subclass's block
    const std::uint64_t block = block_of(bits);
    const std::uint64_t allocation = atomic_load(&headers[block].allocation);
    if ((~allocation & full_mask(class_id<T>)) == 0) return nullptr;  // full: no refresh, no search
    const std::uint64_t slots = try_reserve_in_block(*this, object_class(class_id<T>), block, 1, mix_seed(bits));
    if (slots == 0) return nullptr;
    return make_pointer<T>(block, lowest_set_bit(slots));
  }

  /// @brief Runs the destructor of @p object's runtime class and frees its slot (what soaheap::destroy calls).
  template <class T>
  SOAHEAP_HD void destroy_object(T* object) const {
    static_assert(is_managed_v<T>, "soaheap::destroy needs a pointer to a managed class");
    if (object == nullptr) return;
    const std::uint64_t bits = reinterpret_cast<std::uint64_t>(object);
    const int runtime_class = class_id_of(bits);
    const std::uint64_t address = data_address_of(bits);
    const int slot = slot_of(bits);
    if (runtime_class >= kClassCount || address < data_base || address >= data_address(block_count) ||
        (address - data_base) % Layout::kDataBytes != 0 || slot >= capacity_of_class(runtime_class)) {
      record_error(HeapErrorKind::destroy_of_foreign_pointer, runtime_class < kClassCount ? runtime_class : 0xff,
                   block_count);
      return;
    }
    const std::uint64_t block = block_of(bits);
#ifdef SOAHEAP_CHECKED
    if (atomic_load(&headers[block].class_id) != static_cast<std::uint32_t>(runtime_class) ||
        !allocated_blocks(runtime_class).get(block)) {
      record_error(HeapErrorKind::destroy_of_foreign_pointer, runtime_class, block);
      return;
    }
#endif
    run_destructor(object, runtime_class);
    // Release: the object's field stores (constructor, methods, destructor) must be visible before
    // its slot is, or the next owner's constructor could be overwritten by a store still on its way.
    release_fence();
    // A running parallel_do keeps its own snapshot (the block list): only `this` may be destroyed
    // among the objects it visits, and its visit has begun, so nothing here needs to tell it.
    if (!release_in_block(*this, object_class(runtime_class), block, std::uint64_t{1} << slot))
      record_error(HeapErrorKind::destroy_of_free_slot, runtime_class, block);
  }

  // ---- block state (also used by defrag and migration) -------------------------------------------------
  /// @brief Frees @p slots of @p block, whatever class its header names now (a rollback of a
  /// reservation in a block that changed class, and migration). False when some were not reserved.
  SOAHEAP_HD bool release_slots(std::uint64_t block, std::uint64_t slots) const {
    // The class cannot change while we still hold slots, so read it before letting go of them.
    const std::uint32_t header_id = atomic_load(&headers[block].class_id);
    if (header_id < static_cast<std::uint32_t>(kClassCount))
      return release_in_block(*this, object_class(static_cast<int>(header_id)), block, slots);
    const int size_class = Untyped::size_class_of_id(header_id);
    if (size_class >= 0) return release_in_block(*this, untyped_class(size_class), block, slots);
    return false;  // run blocks and free blocks hold no reservable slots
  }
  /// Makes active[c] and defrag[c] agree with the block's current fill level.
  SOAHEAP_HD void refresh_block_state(std::uint64_t block, int class_index) const {
    detail::refresh_block_state(headers, object_class(class_index), block);
  }
  /// Starts block @p block (just taken from the free bitmap) as a block of @p class_index with @p slots reserved.
  SOAHEAP_HD void initialize_block(std::uint64_t block, int class_index, std::uint64_t slots) const {
    start_block(*this, object_class(class_index), block, slots);
  }

  // ---- enumeration inside kernels ----------------------------------------------------------------
  /// @brief Calls f(C*) for every live object of T and its subclasses, sequentially in the calling thread.
  /// A full block is a counted loop over its slots (unrolled four times in device code), so the
  /// loads of the next objects' fields need not wait for the bit scan that finds them, and can be in
  /// flight together where the body lets them (docs/decisions/016-device-do-loops.md). Partly
  /// filled blocks keep the bit scan.
  template <class T, class Function>
  SOAHEAP_HD void for_each_object(Function&& f) const {
    for_each_live_slot<T>([&](auto class_tag, std::uint64_t block, int slot, auto full) {
      using C = tag_type_t<decltype(class_tag)>;
      if constexpr (decltype(full)::value) f(static_cast<T*>(make_pointer<C>(block, slot)));
      else f(static_cast<T*>(make_slot_pointer<C>(block, slot)));
    });
  }

  /// @brief for_each_object that also hands f the values of the fields @p Members (pointers to field
  /// members of T or a base of T, e.g. `&Body::pos_x`): f(T*, values...). Each value is read from
  /// its block's SOA array at an offset known at compile time for the visited concrete class, so
  /// the loop indexes arrays like hand-written SOA code. Reading the same fields through the
  /// pointer (`other->pos_x`) decodes the pointer's tag again per field inside such a loop, about a
  /// dozen integer instructions each that nvcc does not fold (docs/decisions/016-device-do-loops.md).
  /// Partly filled blocks are walked slot by slot with a test of each slot's bit rather than by a
  /// bit scan: the loop then unrolls and the loads of the next objects need not wait for the scan
  /// (docs/decisions/016-device-do-loops.md).
  template <class T, auto... Members, class Function>
  SOAHEAP_HD void for_each_object_with(Function&& f) const {
    for_each_live_slot<T, true>([&](auto class_tag, std::uint64_t block, int slot, auto full) {
      using C = tag_type_t<decltype(class_tag)>;
      T* const object = decltype(full)::value ? static_cast<T*>(make_pointer<C>(block, slot))
                                              : static_cast<T*>(make_slot_pointer<C>(block, slot));
      f(object, field_value<C, Members>(block, slot)...);
    });
  }

  /// @brief The value of field @p Member of the object in @p slot of @p block, a block of concrete class C.
  template <class C, auto Member>
  SOAHEAP_HD auto field_value(std::uint64_t block, int slot) const {
    using FieldType = typename member_pointer_traits<decltype(Member)>::field;
    using Owner = typename member_pointer_traits<decltype(Member)>::owner;
    using Value = typename FieldType::value_type;
    static_assert(std::is_base_of_v<Owner, C>, "soaheap: the field is not a field of the visited class");
    static_assert(!is_soaheap_array<Value>::value, "soaheap: array fields are read through the object pointer");
    // Inherited fields come first, so the field's index among Owner's fields is its index in C too.
    constexpr std::uint64_t kOffset =
        soa_array_offset<all_field_types_t<C>, FieldType::global_index()>(Layout::template capacity<C>);
    // Generic loads, not global ones (`__builtin_assume(__isGlobal(...))` as in Field::address()):
    // docs/decisions/017-global-and-generic-loads.md.
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
      using C = tag_type_t<decltype(class_tag)>;
      const BitmapView allocated = allocated_blocks(class_id<C>);
      const std::uint64_t words = block_words();
      // Level 1 says which level-0 words hold a block of C, and only those are read: a growable
      // heap indexes two to four times the blocks it maps, and the level-0 words of the
      // interleaved bitmaps lie a cache line apart (nbody's 16,384 bodies in a heap grown from
      // 64 MiB read 1,024 words per visit for four). A bitmap of one level has no level 1: every
      // word is read. The scan keeps one word index as its state: keeping the level-1 word as well
      // took nbody's compute_force kernel from 38 to 46 registers (6 to 5 blocks per SM; nbody
      // 1.027x its time before, H100).
      for (std::uint64_t w = 0; (w = allocated.next_marked_word(w, words)) < words; ++w) {
        std::uint64_t blocks = atomic_load(&allocated.word(0, w));
        while (blocks != 0) {
          const int bit = lowest_set_bit(blocks);
          blocks &= blocks - 1;
          const std::uint64_t block = w * 64 + static_cast<std::uint64_t>(bit);
          std::uint64_t objects = atomic_load(&headers[block].allocation);
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
              const int slot = lowest_set_bit(objects);
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
#if !SOAHEAP_DEVICE_CODE
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

}  // namespace soaheap::detail
