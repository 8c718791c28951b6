#pragma once
/// @file heap_view.cuh
/// @brief `HeapView<Classes...>`: the small, trivially copyable handle that kernels and host
///        threads create, destroy and visit objects through (and, with soaheap::malloc, untyped
///        memory). Its internals are private (detail/heap_internals.cuh); the library's own layers
///        reach them through `detail::internals()` at the end of this file.

#include <soaheap/core/detail/heap_internals.cuh>

#include <cstdint>
#include <new>
#include <type_traits>

namespace soaheap {

template <class... Classes>
class Heap;
namespace detail {
struct InternalsAccess;
}

/// @brief Device/host-thread handle of a heap over @p Classes. Copy it into kernels; it owns nothing.
template <class... Classes>
class HeapView {
 public:
  using Layout = HeapLayout<Classes...>;
  static constexpr int kClassCount = Layout::kClassCount;
  /// Index of class @p T in the heap's class list (-1 when it is none of them).
  template <class T>
  static constexpr int class_id = Layout::template index_of<T>;

  /// @brief Reserves a slot for a new T (what `new (heap) T(...)` calls); nullptr when the heap is
  /// out of memory (reported by the next host call).
  template <class T>
  SOAHEAP_HD void* allocate_slot() const {
    return internals_.template allocate_slot<T>();
  }
  /// @brief allocate_slot for the threads where @p wanted holds, nullptr for the others (what
  /// soaheap::create_if calls). Every lane of a warp calls it together: a whole warp at the call
  /// reserves the slots of all its lanes in one go.
  template <class T>
  SOAHEAP_HD void* allocate_slot_if(bool wanted) const {
    return internals_.template allocate_slot_if<T>(wanted);
  }
  /// @brief allocate_slot_if that first tries the block of @p near (an object of class T alive
  /// during the call): one atomic instead of a search, and the new object next to @p near.
  template <class T>
  SOAHEAP_HD void* allocate_slot_if_near(bool wanted, const T* near) const {
    return internals_.template allocate_slot_if_near<T>(wanted, near);
  }
  /// @brief Runs the destructor of @p object's runtime class and frees its slot (soaheap::destroy).
  template <class T>
  SOAHEAP_HD void destroy_object(T* object) const {
    internals_.destroy_object(object);
  }
  /// @brief Calls f(T*) for every live object of T and its subclasses, sequentially in the calling thread.
  template <class T, class Function>
  SOAHEAP_HD void for_each_object(Function&& f) const {
    internals_.template for_each_object<T>(static_cast<Function&&>(f));
  }
  /// @brief for_each_object that also hands f the values of the fields @p Members: f(T*, values...).
  template <class T, auto... Members, class Function>
  SOAHEAP_HD void for_each_object_with(Function&& f) const {
    internals_.template for_each_object_with<T, Members...>(static_cast<Function&&>(f));
  }
  /// Number of blocks of the heap.
  SOAHEAP_HD std::uint64_t block_count() const { return internals_.block_count; }

 private:
  detail::HeapInternals<Classes...> internals_;
  friend struct detail::InternalsAccess;
};

namespace detail {

/// @brief The one access point to a heap's internals, for the library's own layers (core, defrag,
/// profiler, distributed, compat; tools/ci/check-layering.py keeps everyone else out): a view's
/// HeapInternals, and the owning Heap's members for those layers.
struct InternalsAccess {
  template <class HeapT>
  using BlockList = typename HeapT::BlockList;
  template <class HeapT>
  using OperationGuard = typename HeapT::OperationGuard;
  /// Sorted ids of the blocks in bitmap @p bitmap_index (synchronizes).
  template <class HeapT>
  static BlockList<HeapT> enumerate_blocks(const HeapT& heap, int bitmap_index) {
    return heap.enumerate_blocks(bitmap_index);
  }
  /// A host copy of the heap's metadata (and data with @p with_data), with internals over it.
  template <class HeapT>
  static auto take_snapshot(const HeapT& heap, bool with_data) {
    return heap.take_snapshot(with_data);
  }
  /// State a layer keeps per heap, made on first use (defrag's and migration's scratch).
  template <class State, class HeapT>
  static State& attachment(const HeapT& heap) {
    return heap.template attachment<State>();
  }
  /// Throws usage_error naming @p operation while a bulk operation runs on the heap.
  template <class HeapT>
  static void require_idle(const HeapT& heap, const char* operation) {
    heap.require_idle(operation);
  }

  template <class... Classes>
  SOAHEAP_HD static const HeapInternals<Classes...>& of(const HeapView<Classes...>& view) {
    return view.internals_;
  }
  template <class... Classes>
  SOAHEAP_HD static HeapInternals<Classes...>& of(HeapView<Classes...>& view) {
    return view.internals_;
  }
};

/// The internals of @p view.
template <class... Classes>
SOAHEAP_HD const HeapInternals<Classes...>& internals(const HeapView<Classes...>& view) {
  return InternalsAccess::of(view);
}
template <class... Classes>
SOAHEAP_HD HeapInternals<Classes...>& internals(HeapView<Classes...>& view) {
  return InternalsAccess::of(view);
}
/// The internals of @p heap, an owning Heap (defined in heap.cuh).
template <class... Classes>
HeapInternals<Classes...> internals(const Heap<Classes...>& heap);
/// The internals type of a HeapView or a Heap.
template <class HeapOrView>
using internals_t = std::decay_t<decltype(internals(std::declval<const HeapOrView&>()))>;

}  // namespace detail

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

// Untyped memory shares the block protocol.
#include <soaheap/core/untyped_memory.cuh>
