#pragma once
/// @file heap_layout.cuh
/// @brief What the heap knows at compile time about its classes: ids, capacities, block size.

#include <soaheap/base/object_pointer.cuh>
#include <soaheap/reflection/class_traits.cuh>
#include <soaheap/reflection/field.cuh>
#include <soaheap/reflection/object.cuh>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace soaheap {

/// @brief Block metadata. Headers live in a table of their own, indexed by block id, so that data
/// segments are exactly 64·size(T_min) bytes and start on 128-byte boundaries with no header
/// padding (what makes ≥ 97 % heap utilization possible for 64-byte objects).
struct BlockHeader {
  std::uint64_t allocation;  ///< bit s: slot s holds an object; all ones while the block is free
  std::uint64_t iteration;   ///< untyped runs: run length (head) or head id (body); unused by typed blocks
  std::uint32_t class_id;    ///< class of the objects in this block
  std::uint32_t reserved;
};

namespace detail {

inline constexpr std::uint64_t kInvalidatedBitmap = ~std::uint64_t{0};
inline constexpr std::uint32_t kNoClass = 0xffffffffu;

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

  /// @brief The capacity shared by @p T (when concrete) and every concrete class of the heap derived
  /// from it: what every pointer to T points into. 0 when they differ or none is concrete.
  template <class T>
  static constexpr int uniform_capacity = [] {
    int found = 0;
    bool uniform = true;
    const auto visit = [&](bool applies, int class_capacity) {
      if (!applies) return;
      if (found == 0) {
        found = class_capacity;
      } else if (found != class_capacity) {
        uniform = false;
      }
    };
    (visit(std::is_base_of_v<T, Classes> && !Classes::kAbstract, capacity<Classes>), ...);
    return uniform ? found : 0;
  }();

  /// @brief Whether every class's declared fixed_capacity (if any) is this layout's: false when a
  /// class was declared for a heap of another layout (SOAHEAP_FIXED_CAPACITIES of another heap).
  static constexpr bool fixed_capacities_match() {
    return ((fixed_capacity<Classes>::value == 0 || fixed_capacity<Classes>::value == uniform_capacity<Classes>) &&
            ...);
  }

  /// Bytes of one block's data segment: 64 objects of the smallest class, rounded to the SOA alignment.
  static constexpr std::uint64_t kDataBytes = detail::align_up(
      std::max<std::uint64_t>({std::uint64_t{64} * kSmallestObjectBytes,
                               (Classes::kAbstract ? 0 : detail::soa_segment_bytes<all_field_types_t<Classes>>(
                                                             capacity<Classes>))...}),
      detail::kObjectAlignment);
};

namespace detail {

/// The class list of a heap type (Heap<Classes...>, HeapView<Classes...>) as a HeapLayout, found
/// without instantiating the heap type (its classes may still be incomplete). @p Dependent delays
/// the lookup to the use of SOAHEAP_FIXED_CAPACITIES's specialization.
template <class HeapType, class Dependent>
struct layout_of;
template <template <class...> class HeapTemplate, class... Classes, class Dependent>
struct layout_of<HeapTemplate<Classes...>, Dependent> {
  using type = HeapLayout<Classes...>;
  template <class T>
  static constexpr bool holds = index_of<T, Classes...>() >= 0;
};

}  // namespace detail

}  // namespace soaheap

/// @brief Declares that the classes of heap type @p HeapType (soaheap::Heap<...>) live in no heap of
/// another layout, so that their field proxies use this layout's capacities as compile-time
/// constants (soaheap::fixed_capacity): a field reached through a pointer loaded from memory then
/// costs a multiply-add on the block address instead of a decode of the pointer's capacity bits.
/// Use at global namespace scope, after the heap type and before the classes' member functions
/// (the classes may still be incomplete): `SOAHEAP_FIXED_CAPACITIES(StructureHeap);`. A class may be
/// declared for one heap layout only; every Heap checks at compile time that the capacities declared
/// for its classes are its own.
#define SOAHEAP_FIXED_CAPACITIES(HeapType)                                                                 \
  namespace soaheap {                                                                                      \
  template <class SoaheapClass>                                                                            \
  struct fixed_capacity<SoaheapClass,                                                                      \
                        std::enable_if_t<detail::layout_of<HeapType, SoaheapClass>::template holds<SoaheapClass>>> \
      : std::integral_constant<int, detail::layout_of<HeapType, SoaheapClass>::type::template uniform_capacity< \
                                        SoaheapClass>> {};                                                 \
  }  /* namespace soaheap */                                                                               \
  static_assert(true, "SOAHEAP_FIXED_CAPACITIES ends with a semicolon")
