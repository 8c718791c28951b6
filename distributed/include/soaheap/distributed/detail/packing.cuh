#pragma once
/// @file detail/packing.cuh
/// @brief The wire format of migrating objects of one concrete class C, and the kernels of a
///        migration step (survey, plan, pack, fresh-block claim, unpack, and the small copies
///        between device words and host-visible words).
///
/// A message to one peer carries n objects of C as SOA arrays, like a block does: field 0 of all n
/// objects, then field 1, ..., each array starting on a 16-byte boundary. Managed pointer fields
/// travel as 64-bit global names (0 = null, name + 1 otherwise) that the application's Links give;
/// all other fields travel bit for bit.

#include <soaheap/core/heap_view.cuh>
#include <soaheap/core/detail/field_copy.cuh>
#include <soaheap/distributed/links.cuh>
#include <soaheap/reflection/class_traits.cuh>

#include <cstdint>
#include <type_traits>
#include <utility>

namespace soaheap::distributed::detail {

using soaheap::detail::align_up;
using soaheap::detail::atomic_cas;
using soaheap::detail::atomic_fetch_add;
using soaheap::detail::atomic_load;
using soaheap::detail::soa_array_offset;

/// What the survey decides for a slot: -1 stays (or is no object), otherwise the destination rank.
inline constexpr std::int32_t kStays = -1;

/// Device counters of one migration step of one class (zeroed before it, except the two `first_`
/// fields, which start at -1).
struct MigrationCounters {
  std::uint64_t untranslated;        ///< objects kept home: a pointer field Links could not translate
  std::uint64_t bad_destinations;    ///< objects kept home: destination() named no rank
  std::uint64_t unlinked;            ///< pointers that arrived as a name the receiver could not resolve
  std::uint64_t not_created;         ///< received objects the heap had no room for
  std::int64_t first_bad_destination;
  std::int64_t first_untranslated_field;  ///< field index (in all_field_types_t order), -1 if none
};
inline constexpr int kCounterWords = 6;
static_assert(sizeof(MigrationCounters) == kCounterWords * sizeof(std::uint64_t), "MigrationCounters is six words");

/// counters[key] += 1 for the calling thread; returns the value before its own increment. On the
/// GPU the active lanes of a warp that share a key make one atomic together (with two ranks every
/// leaving object has the same key: one atomic per warp instead of one per object).
SOAHEAP_HD inline std::uint64_t aggregated_increment(std::uint64_t* counters, int key) {
#if SOAHEAP_DEVICE_CODE
  const unsigned active = __activemask();
  const unsigned peers = __match_any_sync(active, key);
  const int leader = __ffs(peers) - 1;
  const unsigned lane = threadIdx.x % 32u;
  std::uint64_t base = 0;
  if (static_cast<int>(lane) == leader) base = atomic_fetch_add(&counters[key], static_cast<std::uint64_t>(__popc(peers)));
  base = __shfl_sync(peers, base, leader);
  return base + static_cast<std::uint64_t>(__popc(peers & ((1u << lane) - 1u)));
#else
  return atomic_fetch_add(&counters[key], 1);
#endif
}

/// Byte layout of n objects of C in a message.
template <class C>
struct WireLayout {
  using FieldList = all_field_types_t<C>;
  static constexpr std::uint64_t kAlignment = 16;

  /// Bytes per object of field Field on the wire (pointers travel as 64-bit names).
  template <int Field>
  static constexpr std::uint64_t field_bytes() {
    return sizeof(type_at_t<FieldList, Field>);
  }
  template <int Field>
  SOAHEAP_HD static constexpr std::uint64_t array_offset(std::uint64_t n) {
    return offset_before(n, std::make_integer_sequence<int, Field>{});
  }
  SOAHEAP_HD static constexpr std::uint64_t message_bytes(std::uint64_t n) {
    return offset_before(n, std::make_integer_sequence<int, FieldList::size>{});
  }

 private:
  template <int... Before>
  SOAHEAP_HD static constexpr std::uint64_t offset_before(std::uint64_t n, std::integer_sequence<int, Before...>) {
    (void)n;  // unused for field 0
    return (std::uint64_t{0} + ... + align_up(n * field_bytes<Before>(), kAlignment));
  }
};
// A pointer is 8 bytes on every platform soaheap supports, so its array needs no resizing.
static_assert(sizeof(void*) == sizeof(std::uint64_t), "soaheap: migration assumes 64-bit pointers");

/// Address of field Field of the object in @p slot of the block whose data starts at @p data.
template <class C, int Field>
SOAHEAP_HD std::uint64_t field_address(std::uint64_t data, int slot, int capacity) {
  using FieldList = all_field_types_t<C>;
  return data + soa_array_offset<FieldList, Field>(capacity) +
         static_cast<std::uint64_t>(slot) * sizeof(type_at_t<FieldList, Field>);
}

/// The index of the first managed pointer field of the object that is neither null nor translated
/// by @p links, or -1.
template <class C, class Links, int... Fields>
SOAHEAP_HD int first_untranslated(std::uint64_t data, int slot, int capacity, const Links& links,
                                  std::integer_sequence<int, Fields...>) {
  using FieldList = all_field_types_t<C>;
  int found = -1;
  const auto check = [&](auto field_tag) {
    constexpr int kField = decltype(field_tag)::value;
    using FieldType = type_at_t<FieldList, kField>;
    if constexpr (is_managed_pointer_field_v<FieldType>) {
      using Pointee = typename soaheap::detail::pointee_of_field<FieldType>::type;
      const auto* values = reinterpret_cast<Pointee* const*>(field_address<C, kField>(data, slot, capacity));
      for (int e = 0; e < pointer_field_extent_v<FieldType>; ++e)
        if (found < 0 && values[e] != nullptr && links.to_global(values[e]) == kUntranslated) found = kField;
    }
  };
  (check(std::integral_constant<int, Fields>{}), ...);
  return found;
}

/// Items of a migration step of class C: slot i % N_C of block i / N_C for every block of the heap
/// (block_count * N_C items), those of C's blocks asked `destination(object)`. Going over the whole
/// heap needs no list of C's blocks, whose length only a wait for the device could tell; a thread
/// of another class's block stops after one bitmap load. Each class has a decision per item in a
/// region of its own (from @p decision_base), so the survey writes every item's decision and the
/// pack reads it without looking at the block again (the pack frees blocks as it goes).
template <class View, class C, class T, class Destination>
struct SlotItems {
  static constexpr int kCapacity = View::Layout::template capacity<C>;
  View view;
  Destination destination;
  std::uint64_t decision_base;

  /// The pointer bits of item @p i's object (whether or not the slot is live).
  SOAHEAP_HD std::uint64_t bits_of(std::uint64_t i) const {
    return view.make_pointer_bits(i / kCapacity, static_cast<int>(i % kCapacity), View::template class_id<C>);
  }
  /// Item @p i's object, or 0 when its block is not C's or its slot is free.
  SOAHEAP_HD std::uint64_t live_object(std::uint64_t i) const {
    const std::uint64_t block = i / kCapacity;
    if (!view.allocated_blocks(View::template class_id<C>).get(block)) return 0;
    const std::uint64_t allocation = atomic_load(&view.headers[block].allocation);
    return ((allocation >> (i % kCapacity)) & 1u) != 0 ? bits_of(i) : 0;
  }
  /// Whether item @p i's decision belongs to this class (every item has its own here).
  SOAHEAP_HD bool owns(std::uint64_t) const { return true; }
  SOAHEAP_HD std::uint64_t decision_index(std::uint64_t i) const { return decision_base + i; }
  SOAHEAP_HD int destination_of(std::uint64_t, std::uint64_t bits) const {
    return destination(static_cast<T*>(reinterpret_cast<C*>(bits)));
  }
};

/// Items of a migration step of class C: the departures kernels recorded (DepartureList), those of
/// class C among them. The kernels run over the list's capacity and read the recorded count on the
/// device, so the host need not know it in advance. Every item is one class's, so the classes share
/// one decision per item.
template <class View, class C>
struct DepartureItems {
  const std::uint64_t* objects;
  const std::int32_t* ranks;
  const std::uint64_t* recorded;  ///< may exceed capacity (those beyond were not recorded)
  std::uint64_t capacity;
  SOAHEAP_HD std::uint64_t bits_of(std::uint64_t i) const { return objects[i]; }
  SOAHEAP_HD std::uint64_t live_object(std::uint64_t i) const {
    const std::uint64_t count = atomic_load(recorded);
    if (i >= (count < capacity ? count : capacity)) return 0;
    const std::uint64_t bits = objects[i];
    return soaheap::detail::class_id_of(bits) == View::template class_id<C> ? bits : 0;
  }
  SOAHEAP_HD bool owns(std::uint64_t i) const { return live_object(i) != 0; }
  SOAHEAP_HD std::uint64_t decision_index(std::uint64_t i) const { return i; }
  SOAHEAP_HD int destination_of(std::uint64_t i, std::uint64_t) const { return ranks[i]; }
};

/// Step 1, one thread per item: where each object goes.
template <class View, class C, class Items, class Links>
struct SurveyKernel {
  static constexpr int kCapacity = View::Layout::template capacity<C>;
  View view;
  Items items;
  std::int32_t* decisions;              ///< [items]
  std::uint64_t* per_rank;              ///< [size] objects leaving for each rank
  MigrationCounters* counters;
  Links links;
  int rank;
  int size;

  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    if (!items.owns(tid)) return;
    std::int32_t decision = kStays;
    const std::uint64_t bits = items.live_object(tid);
    if (bits != 0) {
      const int target = items.destination_of(tid, bits);
      if (target < 0 || target >= size) {
        atomic_fetch_add(&counters->bad_destinations, 1);
        atomic_cas(reinterpret_cast<std::uint64_t*>(&counters->first_bad_destination),
                   static_cast<std::uint64_t>(std::int64_t{-1}), static_cast<std::uint64_t>(std::int64_t{target}));
      } else if (target != rank) {
        const int field = first_untranslated<C>(view.data_address(view.block_of(bits)), soaheap::detail::slot_of(bits),
                                                kCapacity, links,
                                                std::make_integer_sequence<int, all_field_types_t<C>::size>{});
        if (field >= 0) {
          atomic_fetch_add(&counters->untranslated, 1);
          atomic_cas(reinterpret_cast<std::uint64_t*>(&counters->first_untranslated_field),
                     static_cast<std::uint64_t>(std::int64_t{-1}), static_cast<std::uint64_t>(std::int64_t{field}));
        } else {
          decision = target;
          aggregated_increment(per_rank, target);
        }
      }
    }
    decisions[items.decision_index(tid)] = decision;
  }
};

/// Step 2, one thread per item again: each leaving object is written into its peer's message and its slot
/// freed (without its destructor: the object lives on at the receiver).
template <class View, class C, class Items, class Links>
struct PackKernel {
  static constexpr int kCapacity = View::Layout::template capacity<C>;
  using FieldList = all_field_types_t<C>;
  View view;
  Items items;
  const std::int32_t* decisions;
  const std::uint64_t* per_rank;         ///< [size] objects per message
  const std::uint64_t* message_offsets;  ///< [size] byte offset of each message in the buffer
  std::uint64_t* cursors;                ///< [size] zeroed: objects written per message
  unsigned char* buffer;
  const std::uint64_t* held;             ///< nonzero: pack nothing (PlanKernel: no room, or a heap error)
  Links links;

  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    if (atomic_load(held) != 0 || !items.owns(tid)) return;
    const std::int32_t target = decisions[items.decision_index(tid)];
    if (target == kStays) return;
    const std::uint64_t bits = items.bits_of(tid);
    const std::uint64_t block = view.block_of(bits);
    const int slot = soaheap::detail::slot_of(bits);
    const std::uint64_t position = aggregated_increment(cursors, target);
    pack(view.data_address(block), slot, buffer + message_offsets[target], per_rank[target], position,
         std::make_integer_sequence<int, FieldList::size>{});
    view.release_slots(block, std::uint64_t{1} << slot);
  }

 private:
  template <int... Fields>
  SOAHEAP_HD void pack(std::uint64_t data, int slot, unsigned char* message, std::uint64_t n, std::uint64_t position,
                       std::integer_sequence<int, Fields...>) const {
    (pack_field<Fields>(data, slot, message, n, position), ...);
  }
  template <int Field>
  SOAHEAP_HD void pack_field(std::uint64_t data, int slot, unsigned char* message, std::uint64_t n,
                             std::uint64_t position) const {
    using FieldType = type_at_t<FieldList, Field>;
    const std::uint64_t source = field_address<C, Field>(data, slot, kCapacity);
    unsigned char* target = message + WireLayout<C>::template array_offset<Field>(n) + position * sizeof(FieldType);
    if constexpr (is_managed_pointer_field_v<FieldType>) {
      using Pointee = typename soaheap::detail::pointee_of_field<FieldType>::type;
      const auto* values = reinterpret_cast<Pointee* const*>(source);
      auto* names = reinterpret_cast<std::uint64_t*>(target);
      for (int e = 0; e < pointer_field_extent_v<FieldType>; ++e)
        names[e] = values[e] == nullptr ? 0 : links.to_global(values[e]) + 1;  // the survey checked it
    } else {
      soaheap::detail::FieldValue<FieldType> value;
      value.load(reinterpret_cast<const void*>(source));
      value.store(target);
    }
  }
};

/// No fresh block for this group of arrivals (the heap had no free block left).
inline constexpr std::uint32_t kNoFreshBlock = 0xffffffffu;

/// Step 3a of the fresh_blocks placement, one thread per word of the free bitmap's lowest level:
/// each free block that the thread finds takes the next group of N_C arrivals (a device counter
/// hands out group numbers, so no list of free blocks has to be read back to the host) and is
/// started as a block of C with the group's slots reserved. @p blocks is filled with kNoFreshBlock
/// first (FillWordsKernel): groups beyond the free blocks take their slots one by one.
template <class View, class C>
struct ClaimFreshBlocksKernel {
  static constexpr int kCapacity = View::Layout::template capacity<C>;
  View view;
  std::uint64_t* claimed;  ///< zeroed: groups handed out so far (may pass @p groups)
  std::uint32_t* blocks;   ///< [groups]
  std::uint64_t groups;
  std::uint64_t arrivals;

  SOAHEAP_HD void operator()(std::uint64_t word) const {
    if (atomic_load(claimed) >= groups) return;
    const soaheap::BitmapView free_bits = view.free_blocks();
    std::uint64_t bits = atomic_load(free_bits.level0_word(word));
    while (bits != 0) {
      const std::uint64_t block = word * 64 + static_cast<std::uint64_t>(soaheap::detail::lowest_set_bit(bits));
      bits &= bits - 1;
      if (block >= view.block_count) return;
      const std::uint64_t group = atomic_fetch_add(claimed, 1);
      if (group >= groups) return;
      const std::uint64_t first = group * kCapacity;
      const int count = static_cast<int>(arrivals - first < kCapacity ? arrivals - first : kCapacity);
      free_bits.clear(block);
      view.initialize_block(block, View::template class_id<C>, soaheap::detail::low_bits(count));
      view.count_block_taken();
      blocks[group] = static_cast<std::uint32_t>(block);
    }
  }
};

/// to[i] = from[i]: device words to host-visible words and back (HostWords), in stream order.
struct CopyWordsKernel {
  const std::uint64_t* from;
  std::uint64_t* to;
  SOAHEAP_HD void operator()(std::uint64_t i) const { to[i] = from[i]; }
};

/// words[i] = value.
template <class Word>
struct FillWordsKernel {
  Word* words;
  Word value;
  SOAHEAP_HD void operator()(std::uint64_t i) const { words[i] = value; }
};

/// Sets the step's device words: all zero, but the `first_` fields of each class's counters -1.
struct StartStepKernel {
  std::uint64_t* words;
  std::uint64_t counters_begin;  ///< word index of class 0's MigrationCounters
  std::uint64_t counters_end;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const bool first_field = i >= counters_begin && i < counters_end && (i - counters_begin) % kCounterWords >= 4;
    words[i] = first_field ? ~std::uint64_t{0} : 0;
  }
};

/// Message bytes of class @p class_index to each rank (one thread per rank), from its survey's counts.
template <class C>
struct MessageBytesKernel {
  const std::uint64_t* counts;  ///< [size] the class's row
  std::uint64_t* bytes;         ///< [size][classes]
  int class_index;
  int classes;
  SOAHEAP_HD void operator()(std::uint64_t peer) const {
    bytes[peer * static_cast<std::uint64_t>(classes) + static_cast<std::uint64_t>(class_index)] =
        WireLayout<C>::message_bytes(counts[peer]);
  }
};

/// One thread: where each class's message to each rank starts in the send buffer (one message per
/// rank, its classes in order), the total, and whether to hold the pack back: the total exceeds
/// the buffer (the host grows it and packs again), or the heap holds an error from earlier kernels
/// (the host throws it at its wait, before anything has moved).
template <class View>
struct PlanKernel {
  View view;
  const std::uint64_t* bytes;  ///< [size][classes]
  std::uint64_t* offsets;      ///< [classes][size]
  std::uint64_t* plan;         ///< [0] total bytes, [1] held
  std::uint64_t capacity;
  int size;
  int classes;
  SOAHEAP_HD void operator()(std::uint64_t) const {
    std::uint64_t offset = 0;
    for (int p = 0; p < size; ++p)
      for (int c = 0; c < classes; ++c) {
        offsets[static_cast<std::uint64_t>(c) * size + p] = offset;
        offset += bytes[static_cast<std::uint64_t>(p) * classes + c];
      }
    plan[0] = offset;
    plan[1] = (offset > capacity || atomic_load(&view.state->error) != 0) ? 1 : 0;
  }
};

/// Step 3, one thread per received object: a slot of C is allocated and the object written into it.
template <class View, class C, class Links>
struct UnpackKernel {
  static constexpr int kCapacity = View::Layout::template capacity<C>;
  using FieldList = all_field_types_t<C>;
  View view;
  const std::uint64_t* first_object;     ///< [size + 1] prefix sums of the received counts
  const std::uint64_t* message_offsets;  ///< [size] byte offset of each received message
  const unsigned char* buffer;
  MigrationCounters* counters;
  Links links;
  int size;
  const std::uint32_t* fresh_blocks;  ///< fresh_blocks placement: the claimed blocks; nullptr: fill holes

  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    int peer = 0;
    while (peer + 1 < size && first_object[peer + 1] <= tid) ++peer;
    const std::uint64_t n = first_object[peer + 1] - first_object[peer];
    const std::uint64_t position = tid - first_object[peer];
    std::uint64_t block = 0;
    int slot = 0;
    const std::uint32_t fresh = fresh_blocks != nullptr ? fresh_blocks[tid / kCapacity] : kNoFreshBlock;
    if (fresh != kNoFreshBlock) {
      block = fresh;
      slot = static_cast<int>(tid % kCapacity);
    } else {
      void* slot_pointer = view.template allocate_slot<C>();
      if (slot_pointer == nullptr) {  // the heap has recorded out_of_memory; the host throws it
        atomic_fetch_add(&counters->not_created, 1);
        return;
      }
      const std::uint64_t bits = reinterpret_cast<std::uint64_t>(slot_pointer);
      block = view.block_of(bits);
      slot = soaheap::detail::slot_of(bits);
    }
    unpack(view.data_address(block), slot, buffer + message_offsets[peer], n, position,
           std::make_integer_sequence<int, FieldList::size>{});
  }

 private:
  template <int... Fields>
  SOAHEAP_HD void unpack(std::uint64_t data, int slot, const unsigned char* message, std::uint64_t n,
                         std::uint64_t position, std::integer_sequence<int, Fields...>) const {
    (unpack_field<Fields>(data, slot, message, n, position), ...);
  }
  template <int Field>
  SOAHEAP_HD void unpack_field(std::uint64_t data, int slot, const unsigned char* message, std::uint64_t n,
                               std::uint64_t position) const {
    using FieldType = type_at_t<FieldList, Field>;
    const unsigned char* source = message + WireLayout<C>::template array_offset<Field>(n) + position * sizeof(FieldType);
    const std::uint64_t target = field_address<C, Field>(data, slot, kCapacity);
    if constexpr (is_managed_pointer_field_v<FieldType>) {
      using Pointee = typename soaheap::detail::pointee_of_field<FieldType>::type;
      const auto* names = reinterpret_cast<const std::uint64_t*>(source);
      auto* values = reinterpret_cast<Pointee**>(target);
      for (int e = 0; e < pointer_field_extent_v<FieldType>; ++e) {
        Pointee* local = nullptr;
        if (names[e] != 0) {
          local = links.to_local(link_type<std::remove_cv_t<Pointee>>{}, names[e] - 1);
          if (local == nullptr) atomic_fetch_add(&counters->unlinked, 1);
        }
        values[e] = local;
      }
    } else {
      soaheap::detail::FieldValue<FieldType> value;
      value.load(source);
      value.store(reinterpret_cast<void*>(target));
    }
  }
};

}  // namespace soaheap::distributed::detail
