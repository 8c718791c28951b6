#pragma once
/// @file dynasoar/class_model.h
/// @brief DynaSOAr's way of declaring classes, mapped onto soaheap's class model: `SoaBase<A>`,
///        `declare_field_types(Class, types...)`, `Field<Class, i>` / `SoaField<Class, i>`,
///        `DeviceArray<T, N>`, `BaseClass` and `kIsAbstract`.
///
/// A DynaSOAr class is written
/// @code
///   class Fish : public Agent {
///    public:
///     declare_field_types(Fish, uint32_t)   // own field types, first thing in the class
///     using BaseClass = Agent;               // after it: the managed base class
///     static const bool kIsAbstract = false;
///     Field<Fish, 0> egg_timer_;
///   };
/// @endcode
/// soaheap needs, per class, `soaheap_self`, `FieldTypes`, `kName`, `kAbstract` and its managed base.
/// The macro declares the first three directly. `soaheap_self` is found from `this`, not from the
/// macro's first argument: DynaSOAr programs also write a subclass that names its base there
/// (`class BarSub : public Bar { ... declare_field_types(Bar, int) ... }`, DynaSOAr's api-example),
/// and `new (allocator) BarSub(...)` must still create a BarSub (see detail::SelfReader).
/// `BaseClass` and `kIsAbstract` are declared *after* the macro, so nothing inside the macro can name them as types or constants; the base therefore
/// comes through reflection's managed_base customization point (specialized below, read when the
/// class is complete), and `kAbstract` is an object whose constexpr conversion to bool reads
/// `kIsAbstract` only when soaheap evaluates it, which is always after the class is complete.

#include <soaheap/reflection/array.cuh>
#include <soaheap/reflection/class_traits.cuh>
#include <soaheap/reflection/field.cuh>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace soaheap::compat::dynasoar {

namespace detail {

/// Common base of every SoaBase<A>: lets reflection recognise DynaSOAr-style classes.
struct soa_root : ::soaheap::detail::object_root {};

/// `kAbstract` of a DynaSOAr-style class: converts to Class::kIsAbstract when soaheap asks, by
/// which time Class is complete (see the file comment).
template <class Class>
struct abstract_flag {
  SOAHEAP_HD constexpr operator bool() const { return Class::kIsAbstract; }  // NOLINT: implicit on purpose
};

/// `fields<Types...>` from DynaSOAr's macro arguments `(Class, Types...)`: a template drops the
/// class, so that the macro needs no separate variadic part (a class with no own fields,
/// `declare_field_types(AnchorNode)`, passes a single argument).
template <class Class, class... Types>
struct own_fields {
  using type = ::soaheap::fields<Types...>;
};

// The class a `declare_field_types` stands in. C++ cannot name the enclosing class in a class-scope
// declaration, but `this` may appear in a member function's trailing return type: the macro
// declares such a function whose return type instantiates SelfWriter<Tag, Class>, which defines the
// friend self_of(SelfReader<Tag>) returning Class*; the next declaration reads it back through the
// class's own Tag. (A friend defined by a template instantiation: GCC and nvcc warn that the
// friend is not a template, which is the point here.)
#if defined(__NVCC__)
#pragma nv_diag_suppress 1301
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-template-friend"
#endif
template <class Tag>
struct SelfReader {
  friend auto self_of(SelfReader<Tag>);
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#if defined(__NVCC__)
#pragma nv_diag_default 1301
#endif
template <class Tag, class Class>
struct SelfWriter {
  friend auto self_of(SelfReader<Tag>) { return static_cast<Class*>(nullptr); }
};

/// The pointer bits of @p object, hidden from the optimizer: DynaSOAr programs call methods such as
/// `cast<T>()` on null pointers (`agent_->cast<Fish>()` on an empty cell) and expect nullptr back,
/// but compilers may assume `this != nullptr` and fold such a test away.
SOAHEAP_HD inline std::uintptr_t opaque_address(const void* object) {
  auto bits = reinterpret_cast<std::uintptr_t>(object);
#if defined(__CUDA_ARCH__)
  asm volatile("mov.b64 %0, %0;" : "+l"(bits));
#elif defined(__GNUC__)
  asm volatile("" : "+r"(bits));
#endif
  return bits;
}

}  // namespace detail

/// @brief What every DynaSOAr-style class of allocator @p AllocatorT derives from, directly (a root
/// class) or through its base class. Also reachable as `AllocatorT::Base`.
template <class AllocatorT>
class SoaBase : public detail::soa_root {
 public:
  /// The allocator type (DynaSOAr's name).
  using Allocator = AllocatorT;
  /// A subclass of another managed class overrides this with that class.
  using BaseClass = void;
  /// An abstract class overrides this with true; it is never allocated itself.
  static const bool kIsAbstract = false;

  /// @brief The class id (index into the allocator's class list) encoded in this object's pointer.
  SOAHEAP_HD int get_type() const { return ::soaheap::detail::class_id_of(detail::opaque_address(this)); }

  /// @brief This object as a @p T when its runtime class is exactly T, else nullptr (also for a
  /// null `this`, as DynaSOAr programs rely on).
  template <class T>
  SOAHEAP_HD T* cast() {
    return matches<T>() ? static_cast<T*>(this) : nullptr;
  }
  template <class T>
  SOAHEAP_HD const T* cast() const {
    return matches<T>() ? static_cast<const T*>(this) : nullptr;
  }

 private:
  template <class T>
  SOAHEAP_HD bool matches() const {
    const std::uintptr_t bits = detail::opaque_address(this);
    return bits != 0 && ::soaheap::detail::class_id_of(bits) == AllocatorT::template class_id<T>;
  }
};

/// @brief True when T is a class declared DynaSOAr-style (derives from some SoaBase).
template <class T>
inline constexpr bool is_dynasoar_class_v = std::is_base_of_v<detail::soa_root, T>;

/// @brief DynaSOAr's field proxy: soaheap's Field plus what DynaSOAr programs use on top of it —
/// initialization in a constructor's member-initializer list, `&field` for the address of the
/// value (e.g. `curand(&random_state_)`), and `*field` on pointer fields.
template <class Owner, int Index>
class SoaField : public ::soaheap::Field<Owner, Index> {
  using Proxy = ::soaheap::Field<Owner, Index>;

 public:
  using typename Proxy::value_type;

  SoaField() = default;
  /// `Cell(int id) : agent_(nullptr) {...}`
  SOAHEAP_HD explicit SoaField(value_type value) { *this->address() = value; }

  // soaheap's Field takes plain operands by value and reads another field through its value, as
  // DynaSOAr programs need (`energy_ += kEngeryBoost;` with a host `static const` in device code,
  // `sugar_ -= metabolism_;` in sugarscape).
  using Proxy::operator=;
  using Proxy::operator+=;
  using Proxy::operator-=;
  using Proxy::operator*=;
  using Proxy::operator/=;
  using Proxy::operator%=;
  using Proxy::operator&=;
  using Proxy::operator|=;
  using Proxy::operator^=;
  SOAHEAP_HD SoaField& operator=(const SoaField& other) {
    Proxy::operator=(other);
    return *this;
  }

  SOAHEAP_HD value_type* operator&() { return this->address(); }
  SOAHEAP_HD const value_type* operator&() const { return this->address(); }

  template <class V = value_type, std::enable_if_t<std::is_pointer_v<V>, int> = 0>
  SOAHEAP_HD std::remove_pointer_t<V>& operator*() const {
    return **this->address();
  }
};

/// @brief DynaSOAr's short name for SoaField.
template <class Owner, int Index>
using Field = SoaField<Owner, Index>;

/// @brief DynaSOAr's fixed-size array field type. It is soaheap's own array, so that arrays of
/// object pointers are known to reflection and rewritten when defragmentation moves their targets.
template <class T, int N>
using DeviceArray = ::soaheap::array<T, N>;

/// @brief Destroys @p object (of any class of the allocator): DynaSOAr's `destroy(allocator, p)`.
template <class AllocatorT, class T>
SOAHEAP_HD void destroy(AllocatorT* allocator, T* object) {
  allocator->free(object);
}

/// @brief Destroys the object a pointer field points to: `destroy(device_allocator, agent_)`.
template <class AllocatorT, class Owner, int Index>
SOAHEAP_HD void destroy(AllocatorT* allocator, const ::soaheap::Field<Owner, Index>& field) {
  allocator->free(field.get());
}

}  // namespace soaheap::compat::dynasoar

namespace soaheap {

/// DynaSOAr-style classes name their managed base in `BaseClass` (see the file comment).
template <class T>
struct managed_base<T, std::enable_if_t<compat::dynasoar::is_dynasoar_class_v<T>>> {
  using type = typename T::BaseClass;
};

}  // namespace soaheap

/// @brief DynaSOAr's field declaration: the class's own field types, in the order of its
/// `Field<Class, i>` members (none: `declare_field_types(Class)`). Also declares what soaheap's class
/// model needs besides them (the class name, `kAbstract`, the class itself) and the allocation
/// operators: `new (device_allocator) Class(...)` on the device (or on host threads of the host
/// backend), and the heap/view form soaheap's own parallel_new uses. It leaves the class in a
/// public section.
#define declare_field_types(...)                                                                          \
 public:                                                                                                  \
  struct soaheap_self_tag {};                                                                             \
  auto soaheap_self_writer()                                                                              \
      ->decltype(::soaheap::compat::dynasoar::detail::SelfWriter<soaheap_self_tag,                         \
                                                                 std::remove_pointer_t<decltype(this)>>{}, \
                 void());                                                                                 \
  using soaheap_self = std::remove_pointer_t<decltype(self_of(                                            \
      ::soaheap::compat::dynasoar::detail::SelfReader<soaheap_self_tag>{}))>;                              \
  using FieldTypes = typename ::soaheap::compat::dynasoar::detail::own_fields<__VA_ARGS__>::type;         \
  static constexpr const char* kName = SOAHEAP_DYNASOAR_FIRST_NAME(__VA_ARGS__, unused);                  \
  static constexpr ::soaheap::compat::dynasoar::detail::abstract_flag<soaheap_self> kAbstract{};          \
  template <class SoaheapAllocator>                                                                       \
  SOAHEAP_HD static void* operator new(std::size_t, SoaheapAllocator* allocator) noexcept {               \
    return allocator->template allocate_new<soaheap_self>();                                              \
  }                                                                                                       \
  template <class SoaheapHeapLike>                                                                        \
  SOAHEAP_HD static void* operator new(std::size_t, const SoaheapHeapLike& heap) noexcept {               \
    return heap.template allocate_slot<soaheap_self>();                                                   \
  }                                                                                                       \
  SOAHEAP_HD static void* operator new(std::size_t, soaheap_self* location) noexcept { return location; } \
  template <class SoaheapAllocator>                                                                       \
  SOAHEAP_HD static void operator delete(void*, SoaheapAllocator*) noexcept {}                            \
  template <class SoaheapHeapLike>                                                                        \
  SOAHEAP_HD static void operator delete(void*, const SoaheapHeapLike&) noexcept {}                       \
  SOAHEAP_HD static void operator delete(void*, soaheap_self*) noexcept {}                                \
  static void* operator new(std::size_t) = delete;                                                        \
  static void operator delete(void*) = delete;

// The spelling of the first macro argument; callers append a dummy argument so that the variadic
// part is never empty (ISO C++17 requires at least one argument for it).
#define SOAHEAP_DYNASOAR_FIRST_NAME(first, ...) #first
