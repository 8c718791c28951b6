#pragma once
/// @file dynasoar/soa_allocator.h
/// @brief `SoaAllocator<kNumObjects, Classes...>`: DynaSOAr's device-side allocator object, a thin
///        shell around soaheap's HeapView. Kernels reach it through the pointer that
///        `AllocatorHandle::device_pointer()` returns (`new (device_allocator) T(...)`,
///        `destroy(device_allocator, p)`, `device_allocator->template device_do<T>(...)`,
///        `DBG_used_slots<T>()`, `DBG_allocated_slots<T>()`).

#include <soaheap/compat/dynasoar/class_model.h>
#include <soaheap/core/heap.cuh>
#include <soaheap/core/heap_view.cuh>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#ifndef SOAHEAP_DYNASOAR_NULL_ON_OUT_OF_MEMORY
/// Build flag: 1 makes `new (allocator) T(...)` return nullptr when the heap is full (the handle's
/// next call throws soaheap::out_of_memory), for programs that check `new`'s result. 0 (default):
/// the program stops there with a message naming the class (SoaAllocator::allocate_new).
#define SOAHEAP_DYNASOAR_NULL_ON_OUT_OF_MEMORY 0
#endif

namespace soaheap::compat::dynasoar {

/// @brief DynaSOAr's allocator type over @p Classes, sized for @p NumObjects objects of the smallest
/// class (rounded up to whole blocks of 64 slots), as in DynaSOAr.
///
/// The classes are usually still incomplete where the type is named (`using AllocatorT =
/// SoaAllocator<kNumObjects, Agent, Fish, Shark, Cell>;` precedes `class Cell : public
/// AllocatorT::Base`), so this class template must not look inside them until a member function is
/// used: it keeps the HeapView as plain bytes (a HeapView's members do not depend on the classes)
/// and names the soaheap types only as aliases.
template <std::uint64_t NumObjects, class... Classes>
class SoaAllocator {
 public:
  using ThisAllocator = SoaAllocator;
  /// What a root class derives from: `class Cell : public AllocatorT::Base`.
  using Base = SoaBase<SoaAllocator>;
  /// The soaheap heap and view types behind this allocator.
  using Heap = ::soaheap::Heap<Classes...>;
  using View = ::soaheap::HeapView<Classes...>;

  static_assert(NumObjects > 0, "SoaAllocator: the object count (first template argument) must be positive");
  /// Objects of the smallest class the heap holds (DynaSOAr's N_Objects).
  static constexpr std::uint64_t kNumObjects = NumObjects;
  /// Slots per block.
  static constexpr int kNumBlockElements = ::soaheap::detail::kSlotsPerBlock;
  /// Blocks of the heap (DynaSOAr's N).
  static constexpr std::uint64_t N = (NumObjects + kNumBlockElements - 1) / kNumBlockElements;
  static constexpr int kNumTypes = static_cast<int>(sizeof...(Classes));

  /// @brief Index of @p T in the class list (the id encoded in object pointers); -1 if absent.
  template <class T>
  static constexpr int class_id = ::soaheap::detail::index_of<T, Classes...>();

  /// @brief Made by AllocatorHandle from its heap's view.
  explicit SoaAllocator(const View& view) {
    static_assert(sizeof(View) <= sizeof(view_bytes_), "SoaAllocator: the view storage is too small for HeapView");
    static_assert(std::is_trivially_copyable_v<View>, "SoaAllocator copies the HeapView bytewise");
    static_assert(all_bases_declared(), "SoaAllocator: a class derives from another class of the allocator but "
                                        "does not name it: add `using BaseClass = ItsBaseClass;` after "
                                        "declare_field_types(...)");
    std::memcpy(view_bytes_, &view, sizeof(View));
  }

  /// @brief The soaheap view (usable with soaheap's own device API as well), as a copy.
  ///
  /// The allocator object never changes after the handle made it, so device code reads its words
  /// once, through the read-only cache, into registers (the compiler drops the words a use does not
  /// need). Through a reference into the object every atomic of an allocation or a destroy made the
  /// compiler read them again: the object might have changed.
  SOAHEAP_HD View view() const {
    View copy;
#if SOAHEAP_DEVICE_CODE
    static_assert(sizeof(View) % sizeof(unsigned long long) == 0, "SoaAllocator: HeapView is read as 8-byte words");
    constexpr int kWords = static_cast<int>(sizeof(View) / sizeof(unsigned long long));
    unsigned long long words[kWords];
    const auto* stored = reinterpret_cast<const unsigned long long*>(view_bytes_);
SOAHEAP_UNROLL
    for (int i = 0; i < kWords; ++i) words[i] = __ldg(stored + i);
    std::memcpy(&copy, words, sizeof(View));
#else
    std::memcpy(&copy, view_bytes_, sizeof(View));
#endif
    return copy;
  }

  // ---- allocation -------------------------------------------------------------------------------------

  /// @brief Reserves a slot for a new T (`new (allocator) T(...)`). When the heap has no slot left
  /// the program stops there with a message naming the class and the heap: a kernel prints it and
  /// traps, a host-backend thread prints it to stderr and aborts. DynaSOAr programs use `new`'s
  /// result unchecked (DynaSOAr itself retries forever), so handing them nullptr only moved the
  /// failure to an illegal memory access in their own code. Programs that do check define
  /// SOAHEAP_DYNASOAR_NULL_ON_OUT_OF_MEMORY=1 and get nullptr (the handle's next call then throws
  /// soaheap::out_of_memory).
  template <class T>
  SOAHEAP_HD T* allocate_new() const {
    void* const slot = view().template allocate_slot<T>();
#if !SOAHEAP_DYNASOAR_NULL_ON_OUT_OF_MEMORY
    if (slot == nullptr) stop_out_of_memory(T::kName);
#endif
    return static_cast<T*>(slot);
  }

  /// @brief `new (this) T(args...)`; nullptr (and no constructor call) when out of memory.
  template <class T, class... Args>
  SOAHEAP_HD T* make_new(Args... args) {
    return new (this) T(args...);
  }

  /// @brief Destroys @p object, whose runtime class may be T or a subclass of T.
  template <class T>
  SOAHEAP_HD void free(T* object) const {
    view().destroy_object(object);
  }

  // ---- iteration --------------------------------------------------------------------------------------

  /// @brief Runs `(object->*method)(args...)` for every live object of T and its subclasses,
  /// sequentially in the calling thread (DynaSOAr visits exactly class T).
  template <class T, class F, class... Args>
  SOAHEAP_HD void device_do(F method, Args... args) const {
    view().template for_each_object<T>([&](T* object) { (object->*method)(args...); });
  }

  // ---- statistics -------------------------------------------------------------------------------------

  /// @brief Live objects of exactly class T (a scan over its blocks in the calling thread).
  template <class T>
  SOAHEAP_HD unsigned int DBG_used_slots() const {
    return static_cast<unsigned int>(count_slots<T>(true));
  }

  /// @brief Slots in the blocks of exactly class T, used or not.
  template <class T>
  SOAHEAP_HD unsigned int DBG_allocated_slots() const {
    return static_cast<unsigned int>(count_slots<T>(false));
  }

  /// @brief Fraction of allocated slots that hold no object, over all classes (calling thread).
  SOAHEAP_HD float DBG_calculate_fragmentation() const {
    std::uint64_t used = 0;
    std::uint64_t allocated = 0;
    (accumulate_slots<Classes>(used, allocated), ...);
    return allocated == 0 ? 0.0f : 1.0f - static_cast<float>(used) / static_cast<float>(allocated);
  }

  /// @brief Prints the heap's static layout: blocks, block size and per class its capacity (host).
  static void DBG_print_stats() {
    using Layout = typename Heap::Layout;
    std::printf("soaheap (DynaSOAr compatibility): %llu objects of the smallest class, %llu blocks of %llu bytes\n",
                static_cast<unsigned long long>(kNumObjects), static_cast<unsigned long long>(N),
                static_cast<unsigned long long>(Layout::kDataBytes));
    std::printf("  %-24s %4s %8s %8s %9s\n", "class", "id", "fields", "objects", "abstract");
    int index = 0;
    ((std::printf("  %-24s %4d %8d %8d %9s\n", Classes::kName, index++, ::soaheap::field_count_v<Classes>,
                  static_cast<bool>(Classes::kAbstract) ? 0 : Layout::template capacity<Classes>,
                  static_cast<bool>(Classes::kAbstract) ? "yes" : "no")),
     ...);
  }

 private:
  /// The message and the stop of allocate_new (see there).
  SOAHEAP_HD static void stop_out_of_memory(const char* class_name) {
    constexpr const char* kFormat =
        "soaheap (DynaSOAr compatibility): out of memory in `new %s`: the heap of SoaAllocator<%llu, ...> "
        "(%llu blocks of %d slots) has no slot left. DynaSOAr programs use new's result unchecked, so the "
        "program stops here; give the allocator more objects (its first template argument), or define "
        "SOAHEAP_DYNASOAR_NULL_ON_OUT_OF_MEMORY=1 if the program checks for nullptr.\n";
#if SOAHEAP_DEVICE_CODE
    std::printf(kFormat, class_name, static_cast<unsigned long long>(kNumObjects), static_cast<unsigned long long>(N),
                kNumBlockElements);
    __trap();
#else
    std::fprintf(stderr, kFormat, class_name, static_cast<unsigned long long>(kNumObjects),
                 static_cast<unsigned long long>(N), kNumBlockElements);
    std::abort();
#endif
  }

  /// Every DynaSOAr class of the list that derives from another one names it (or a class between
  /// them) as BaseClass; otherwise its inherited fields would be laid out as its own.
  template <class Ancestor, class Descendant>
  static constexpr bool base_declared() {
    if constexpr (std::is_same_v<Ancestor, Descendant> || !std::is_base_of_v<Ancestor, Descendant>) {
      return true;
    } else {
      using Declared = ::soaheap::managed_base_t<Descendant>;
      if constexpr (std::is_void_v<Declared>) {
        return false;
      } else {
        return std::is_base_of_v<Ancestor, Declared>;
      }
    }
  }
  template <class Descendant>
  static constexpr bool bases_declared() {
    return (base_declared<Classes, Descendant>() && ...);
  }
  static constexpr bool all_bases_declared() { return (bases_declared<Classes>() && ...); }

  template <class T>
  SOAHEAP_HD std::uint64_t count_slots(bool used_only) const {
    constexpr int kClass = class_id<T>;
    static_assert(kClass >= 0, "SoaAllocator: this class is not in the allocator's class list");
    const auto heap = ::soaheap::detail::internals(view());  // a copy: view() is a temporary
    const ::soaheap::BitmapView allocated = heap.allocated_blocks(kClass);
    const std::uint64_t full = heap.full_mask(kClass);
    std::uint64_t slots = 0;
    for (std::uint64_t word = 0; word < heap.block_words(); ++word) {
      std::uint64_t blocks = ::soaheap::detail::atomic_load(&allocated.word(0, word));
      while (blocks != 0) {
        const std::uint64_t block = word * 64 + static_cast<std::uint64_t>(::soaheap::detail::lowest_set_bit(blocks));
        blocks &= blocks - 1;
        slots += used_only ? static_cast<std::uint64_t>(::soaheap::detail::popcount(
                                 ::soaheap::detail::atomic_load(&heap.headers[block].allocation) & full))
                           : static_cast<std::uint64_t>(heap.capacity_of_class(kClass));
      }
    }
    return slots;
  }

  template <class T>
  SOAHEAP_HD void accumulate_slots(std::uint64_t& used, std::uint64_t& allocated) const {
    if constexpr (!static_cast<bool>(T::kAbstract)) {
      used += count_slots<T>(true);
      allocated += count_slots<T>(false);
    }
  }

  /// Room for a HeapView (checked in the constructor), kept as bytes: see the class comment.
  static constexpr std::size_t kViewStorageBytes = 256;
  alignas(16) unsigned char view_bytes_[kViewStorageBytes];
};

}  // namespace soaheap::compat::dynasoar
