#pragma once
/// @file detail/copy_objects.cuh
/// @brief Pass step 1 (paper Alg. 1): copy every object of every source block into its target slot,
///        field by field over the SOA arrays, and mark the target slots allocated.

#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>
#include <soaheap/reflection/class_traits.cuh>

#include <cstdint>
#include <utility>

namespace soaheap::detail {

/// Copies one field value with the widest loads its alignment allows (a byte-wise memcpy would be
/// many small transactions on the GPU).
template <class FieldType>
SOAHEAP_HD inline void copy_field_value(void* destination, const void* source) {
  if constexpr (alignof(FieldType) >= 8 && sizeof(FieldType) % 8 == 0) {
    for (std::size_t w = 0; w < sizeof(FieldType) / 8; ++w)
      static_cast<std::uint64_t*>(destination)[w] = static_cast<const std::uint64_t*>(source)[w];
  } else if constexpr (alignof(FieldType) >= 4 && sizeof(FieldType) % 4 == 0) {
    for (std::size_t w = 0; w < sizeof(FieldType) / 4; ++w)
      static_cast<std::uint32_t*>(destination)[w] = static_cast<const std::uint32_t*>(source)[w];
  } else if constexpr (alignof(FieldType) >= 2 && sizeof(FieldType) % 2 == 0) {
    for (std::size_t w = 0; w < sizeof(FieldType) / 2; ++w)
      static_cast<std::uint16_t*>(destination)[w] = static_cast<const std::uint16_t*>(source)[w];
  } else {
    for (std::size_t w = 0; w < sizeof(FieldType); ++w)
      static_cast<unsigned char*>(destination)[w] = static_cast<const unsigned char*>(source)[w];
  }
}

/// Copies every field of one object of C between two slots of two blocks (SOA arrays).
template <class View, class C>
struct ObjectCopy {
  using FieldList = all_field_types_t<C>;
  static constexpr int kCapacity = View::Layout::template capacity<C>;

  SOAHEAP_HD static void copy(std::uint64_t from_block, int from_slot, std::uint64_t to_block, int to_slot) {
    copy_fields(from_block, from_slot, to_block, to_slot, std::make_integer_sequence<int, FieldList::size>{});
  }

 private:
  template <int... Fields>
  SOAHEAP_HD static void copy_fields(std::uint64_t from_block, int from_slot, std::uint64_t to_block, int to_slot,
                                     std::integer_sequence<int, Fields...>) {
    (copy_field<Fields>(from_block, from_slot, to_block, to_slot), ...);
  }
  template <int Field>
  SOAHEAP_HD static void copy_field(std::uint64_t from_block, int from_slot, std::uint64_t to_block, int to_slot) {
    using FieldType = type_at_t<FieldList, Field>;
    constexpr std::uint64_t kOffset = soa_array_offset<FieldList, Field>(kCapacity);
    copy_field_value<FieldType>(reinterpret_cast<void*>(to_block + kOffset + to_slot * sizeof(FieldType)),
                                reinterpret_cast<const void*>(from_block + kOffset + from_slot * sizeof(FieldType)));
  }
};

/// kThreadsPerSourceBlock consecutive threads per source block; thread s moves the s-th object of
/// its source (if there is one) to the s-th free slot across the source's targets. Every target
/// belongs to exactly one source and every slot to one thread, so no two threads write the same
/// data; the target allocation bits are set with atomics because slots share a 64-bit word.
template <class View, class C>
struct CopyObjectsKernel {
  View view;
  PassPlan plan;

  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t source = tid / kThreadsPerSourceBlock;
    const int rank = static_cast<int>(tid % kThreadsPerSourceBlock);
    const std::uint64_t objects = plan.source_bitmaps[source];
    if (rank >= popcount(objects)) return;
    const int source_slot = select_set_bit(objects, rank);
    const Destination destination = plan.destination_of(source, rank);
    if (destination.block == Destination::kNoDestination) return;  // unreachable for a valid plan
    ObjectCopy<View, C>::copy(view.data_address(plan.source_block(source)), source_slot,
                              view.data_address(destination.block), destination.slot);
    atomic_fetch_or(&view.headers[destination.block].allocation, std::uint64_t{1} << destination.slot);
  }
};

}  // namespace soaheap::detail
