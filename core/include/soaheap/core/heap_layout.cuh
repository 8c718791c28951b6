#pragma once
/// @file heap_layout.cuh
/// @brief What the heap knows at compile time about its classes: ids, capacities, block size.

#include <soaheap/base/object_pointer.cuh>
#include <soaheap/reflection/class_traits.cuh>
#include <soaheap/reflection/object.cuh>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace soaheap {

/// @brief Block metadata. Headers live in a table of their own, indexed by block id, so that data
/// segments are exactly 64·size(T_min) bytes and start on 128-byte boundaries with no header
/// padding (what makes ≥ 97 % heap utilization possible for 64-byte objects). 16 bytes: a growing
/// heap holds headers for twice its mapped blocks (growth_headroom), which at 24 bytes took 9 % of
/// 512-byte blocks; block ids fit 32 bits (kMaxBlocks).
struct BlockHeader {
  std::uint64_t allocation;  ///< bit s: slot s holds an object; all ones while the block is free
  std::uint32_t run;         ///< untyped runs: run length (head) or head id (body); unused by typed blocks
  std::uint32_t class_id;    ///< class of the objects in this block
};
static_assert(sizeof(BlockHeader) == 16);

namespace detail {

inline constexpr std::uint64_t kInvalidatedBitmap = ~std::uint64_t{0};
inline constexpr std::uint32_t kNoClass = 0xffffffffu;
/// The most blocks a heap may have: an untyped run's header holds a block id in 32 bits.
inline constexpr std::uint64_t kMaxBlocks = 0xffffffffu;

template <class T>
constexpr std::size_t concrete_object_size() {
  return T::kAbstract ? ~std::size_t{0} : object_size_v<T>;
}

}  // namespace detail

/// @brief Compile-time layout of a heap over @p Classes.
template <class... Classes>
struct HeapLayout {
  static constexpr int kClassCount = static_cast<int>(sizeof...(Classes));
  static_assert(kClassCount >= 1, "soaheap: a heap needs at least one managed class");
  static_assert(kClassCount <= detail::kMaxClasses,
                "soaheap: too many classes in one heap: at most 32 (the class id has 5 bits in object pointers); "
                "merge small classes or use two heaps");
  static_assert((check_managed_class<Classes>() && ...));
  static_assert(((object_size_v<Classes> > 0 || Classes::kAbstract) && ...),
                "soaheap: a concrete managed class has no fields at all; give it at least one field");
  static_assert(((!Classes::kAbstract) || ...), "soaheap: every class of the heap is abstract; add a concrete class");

  /// Size of the smallest concrete class, which defines the block size (64 of them per block).
  static constexpr std::size_t kSmallestObjectBytes = std::min({detail::concrete_object_size<Classes>()...});

  template <class T>
  static constexpr int index_of = detail::index_of<T, Classes...>();

  /// @brief N_T: objects of T per block.
  template <class T>
  static constexpr int capacity = block_capacity(object_size_v<T>, kSmallestObjectBytes);

  static_assert(((Classes::kAbstract || capacity<Classes> >= 1) && ...),
                "soaheap: a class is more than 64 times the size of the smallest class, so not even one object "
                "fits into a block; move its large data into a separate managed class or enlarge the smallest class");

  /// Bytes of one block's data segment: 64 objects of the smallest class, rounded to the SOA alignment.
  static constexpr std::uint64_t kDataBytes = detail::align_up(
      std::max<std::uint64_t>({std::uint64_t{64} * kSmallestObjectBytes,
                               (Classes::kAbstract ? 0 : detail::soa_segment_bytes<all_field_types_t<Classes>>(
                                                             capacity<Classes>))...}),
      detail::kObjectAlignment);
};

}  // namespace soaheap
