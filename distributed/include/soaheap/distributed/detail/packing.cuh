#pragma once
/// @file detail/packing.cuh
/// @brief The wire format of migrating objects of one concrete class C, and the three kernels of a
///        migration step (survey, pack, unpack).
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

/// Device counters of one migration step of one class (zeroed before it).
struct MigrationCounters {
  std::uint64_t untranslated;        ///< objects kept home: a pointer field Links could not translate
  std::uint64_t bad_destinations;    ///< objects kept home: destination() named no rank
  std::uint64_t unlinked;            ///< pointers that arrived as a name the receiver could not resolve
  std::uint64_t not_created;         ///< received objects the heap had no room for
  std::int64_t first_bad_destination;
  std::int64_t first_untranslated_field;  ///< field index (in all_field_types_t order), -1 if none
};

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

/// Items of a migration step of class C: every slot of C's blocks, asked `destination(object)`.
template <class View, class C, class T, class Destination>
struct SlotItems {
  static constexpr int kCapacity = View::Layout::template capacity<C>;
  View view;
  const std::uint32_t* blocks;  ///< C's blocks
  Destination destination;

  /// The pointer bits of item @p i's object (whether or not the slot is live).
  SOAHEAP_HD std::uint64_t bits_of(std::uint64_t i) const {
    return view.make_pointer_bits(blocks[i / kCapacity], static_cast<int>(i % kCapacity), View::template class_id<C>);
  }
  /// Item @p i's object, or 0 when its slot is free.
  SOAHEAP_HD std::uint64_t live_object(std::uint64_t i) const {
    const std::uint64_t allocation = atomic_load(&view.headers[blocks[i / kCapacity]].allocation);
    return ((allocation >> (i % kCapacity)) & 1u) != 0 ? bits_of(i) : 0;
  }
  SOAHEAP_HD int destination_of(std::uint64_t, std::uint64_t bits) const {
    return destination(static_cast<T*>(reinterpret_cast<C*>(bits)));
  }
};

/// Items of a migration step of class C: the departures kernels recorded (DepartureList), those of
/// class C among them.
template <class View, class C>
struct DepartureItems {
  const std::uint64_t* objects;
  const std::int32_t* ranks;
  SOAHEAP_HD std::uint64_t bits_of(std::uint64_t i) const { return objects[i]; }
  SOAHEAP_HD std::uint64_t live_object(std::uint64_t i) const {
    const std::uint64_t bits = objects[i];
    return soaheap::detail::class_id_of(bits) == View::template class_id<C> ? bits : 0;
  }
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
    decisions[tid] = decision;
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
  Links links;

  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::int32_t target = decisions[tid];
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

/// Step 3a of the fresh_blocks placement, one thread per group of N_C arrivals: group g takes the
/// g-th free block of the heap's free list (listed just before, nothing allocates meanwhile) and
/// starts it as a block of C with the group's slots reserved; groups beyond the free list get
/// kNoFreshBlock (their arrivals take slots one by one).
template <class View, class C>
struct ClaimFreshBlocksKernel {
  static constexpr int kCapacity = View::Layout::template capacity<C>;
  View view;
  const std::uint32_t* free_list;
  std::uint64_t free_count;
  std::uint32_t* blocks;
  std::uint64_t arrivals;

  SOAHEAP_HD void operator()(std::uint64_t group) const {
    if (group >= free_count) {
      blocks[group] = kNoFreshBlock;
      return;
    }
    const std::uint64_t first = group * kCapacity;
    const int count = static_cast<int>(arrivals - first < kCapacity ? arrivals - first : kCapacity);
    const std::uint32_t block = free_list[group];
    view.free_blocks().clear(block);
    view.initialize_block(block, View::template class_id<C>, soaheap::detail::low_bits(count));
    view.count_block_taken();
    blocks[group] = block;
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
