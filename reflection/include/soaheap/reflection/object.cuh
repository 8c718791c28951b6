#pragma once
/// @file object.cuh
/// @brief `soaheap::Object<Self, Base>`: the base every managed class derives from.
///
/// ```
/// class Agent : public soaheap::Object<Agent> {           // a root class
///  public:
///   using FieldTypes = soaheap::fields<int, int>;
///   static constexpr const char* kName = "Agent";
///   static constexpr bool kAbstract = true;               // never allocated itself
///   soaheap::Field<Agent, 0> x;
///   soaheap::Field<Agent, 1> y;
/// };
/// class Fish : public soaheap::Object<Fish, Agent> {      // single inheritance
///  public:
///   using FieldTypes = soaheap::fields<float, Fish*>;
///   static constexpr const char* kName = "Fish";
///   soaheap::Field<Fish, 0> energy;
///   soaheap::Field<Fish, 1> partner;
/// };
/// ```

#include <soaheap/base/portability.cuh>
#include <soaheap/reflection/class_traits.cuh>

#include <cstddef>
#include <type_traits>

namespace soaheap {

/// @brief Base of managed class @p Self; @p BaseClass is its managed base class (void for a root).
/// @tparam Self the class being declared (CRTP)
/// @tparam BaseClass a managed class Self inherits from, or void
template <class Self, class BaseClass = void>
class Object : public std::conditional_t<std::is_void_v<BaseClass>, detail::object_root, BaseClass> {
  using Parent = std::conditional_t<std::is_void_v<BaseClass>, detail::object_root, BaseClass>;

 public:
  using soaheap_self = Self;
  using Base = BaseClass;
  // Placeholders that Self must hide with its own declarations (checked by check_managed_class).
  using FieldTypes = detail::undeclared_field_types<Self>;
  static constexpr const char* kName = nullptr;
  static constexpr bool kAbstract = false;
  /// Thread blocks (of 256 threads) that parallel_do's one-thread-per-object method kernels over
  /// this class keep resident per multiprocessor, 1 to 8, at the price of registers (CUDA's
  /// `__launch_bounds__(256, n)`: 6 caps them at 40, the rest spills); 0 leaves the registers to
  /// the compiler. For a method whose rare branch (a birth's allocation) holds registers that its
  /// common path does not need: more warps then hide the common path's memory latency. Measure:
  /// spills in the common path cost more than the warps gain (docs/architecture.md).
  static constexpr int kMinBlocksPerMultiprocessor = 0;

  /// @brief `new (heap) Self(args...)`: reserves a slot in @p heap (a heap or its device view).
  /// Returns nullptr when the heap is out of memory (the constructor then does not run) and the
  /// heap reports the error at its next host call.
  template <class HeapLike>
  SOAHEAP_HD static void* operator new(std::size_t, const HeapLike& heap) noexcept {
    return heap.template allocate_slot<Self>();
  }
  /// Matches the placement form above; the heap reclaims slots through soaheap::destroy.
  template <class HeapLike>
  SOAHEAP_HD static void operator delete(void*, const HeapLike&) noexcept {}

  static void* operator new(std::size_t) = delete;     // managed objects live only in a soaheap heap
  static void* operator new[](std::size_t) = delete;
  static void operator delete(void*) = delete;          // use soaheap::destroy(heap, pointer)

 protected:
  Object() = default;
  /// Lets a subclass constructor run its base class's constructor: `Derived(...) : Object(args...)`.
  template <class First, class... Rest>
  SOAHEAP_HD explicit Object(First&& first, Rest&&... rest)
      : Parent(static_cast<First&&>(first), static_cast<Rest&&>(rest)...) {}
};

}  // namespace soaheap
