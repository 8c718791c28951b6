#pragma once
/// @file class_traits.cuh
/// @brief Compile-time metadata of managed classes: base, own and inherited fields, name, abstractness,
///        SOA array offsets inside a block, and "which fields can point at T".

#include <soaheap/base/object_pointer.cuh>
#include <soaheap/base/portability.cuh>
#include <soaheap/reflection/array.cuh>
#include <soaheap/reflection/type_list.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace soaheap {

/// @brief Declares a managed class's own field types, in declaration order: `using FieldTypes = fields<float, Body*>;`
template <class... Types>
using fields = type_list<Types...>;

namespace detail {

/// Marker that Object<Self, Base> puts in place of FieldTypes, so that a class which forgets to
/// declare its own field list is caught instead of silently inheriting its base's list.
template <class Self>
struct undeclared_field_types {};

struct object_root {};

/// The base class a class declares as `T::Base` (what soaheap::Object<Self, Base> provides); no
/// `type` when it declares none, so that managed_base stays usable in SFINAE contexts.
template <class T, class = void>
struct declared_base {};
template <class T>
struct declared_base<T, std::void_t<typename T::Base>> {
  using type = typename T::Base;
};

}  // namespace detail

/// @brief Customization point: the managed base class of T (void for a root class).
///
/// By default it is `T::Base`, which soaheap::Object<Self, Base> declares. Reflection reads a
/// class's base only through this trait, because some class models can name their base only after
/// the point where a member alias `Base` would have to be declared: DynaSOAr's classes write
/// `using BaseClass = Agent;` after `declare_field_types(...)`, so the compatibility layer
/// (compat/) specializes this trait for its classes instead. @p Enable is for such
/// enable_if-constrained partial specializations.
template <class T, class Enable = void>
struct managed_base : detail::declared_base<T> {};

/// @brief The managed base class of T (void for a root class); see managed_base.
template <class T>
using managed_base_t = typename managed_base<T>::type;

namespace detail {

// soaheap_self is checked first: a type that lacks it (e.g. a plain struct) is rejected before
// managed_base looks at its bases.
template <class T, class = void>
struct has_object_base : std::false_type {};
template <class T>
struct has_object_base<T, std::void_t<typename T::soaheap_self, managed_base_t<T>>> : std::is_base_of<object_root, T> {};

}  // namespace detail

/// @brief True when T is a managed class (derives from soaheap::Object<T, ...>).
template <class T>
inline constexpr bool is_managed_v = detail::has_object_base<T>::value;

namespace detail {

template <class T, bool = std::is_void_v<T>>
struct all_field_types_impl {
  using type = type_list<>;
};
template <class T>
struct all_field_types_impl<T, false> {
  using type = typename concat<typename all_field_types_impl<managed_base_t<T>>::type, typename T::FieldTypes>::type;
};

template <class T>
constexpr int inherited_field_count() {
  if constexpr (std::is_void_v<managed_base_t<T>>) {
    return 0;
  } else {
    return all_field_types_impl<managed_base_t<T>>::type::size;
  }
}

}  // namespace detail

/// @brief Every field type of T, inherited fields first (the SOA array order inside a block).
template <class T>
using all_field_types_t = typename detail::all_field_types_impl<T>::type;

/// @brief Number of fields of T including inherited ones.
template <class T>
inline constexpr int field_count_v = all_field_types_t<T>::size;

namespace detail {

template <class List>
struct byte_size_of_fields;
template <class... Types>
struct byte_size_of_fields<type_list<Types...>> {
  static constexpr std::size_t value = (std::size_t{0} + ... + sizeof(Types));
};

}  // namespace detail

/// @brief Bytes one object of T occupies in SOA layout (sum of its field sizes).
template <class T>
inline constexpr std::size_t object_size_v = detail::byte_size_of_fields<all_field_types_t<T>>::value;

/// @brief Block capacity of a class of object size @p object_size when the smallest class has @p smallest_size.
constexpr int block_capacity(std::size_t object_size, std::size_t smallest_size) {
  if (object_size == 0) return 64;  // a field-less (abstract) class never occupies slots
  const std::size_t capacity = 64 * smallest_size / object_size;
  return capacity > 64 ? 64 : static_cast<int>(capacity);
}

namespace detail {

constexpr std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Byte offset of SOA array @p Index inside a block data segment of @p capacity slots. Arrays are
/// packed in field order, each at its natural alignment; every array starts on a 128-byte boundary
/// whenever the arrays before it have sizes that are multiples of 128 (always so for capacity 64
/// and fields of at least 2 bytes). Depends only on the capacity and the field-type prefix, which a
/// base class shares with all of its subclasses, so a base-typed pointer finds the same arrays.
template <class FieldList, int Index, int... Before>
SOAHEAP_HD constexpr std::uint64_t soa_array_offset_impl(int capacity, std::integer_sequence<int, Before...>) {
  (void)capacity;  // unused for the first array
  std::uint64_t offset = 0;
  ((offset = align_up(offset, alignof(type_at_t<FieldList, Before>)) +
             static_cast<std::uint64_t>(capacity) * sizeof(type_at_t<FieldList, Before>)),
   ...);
  return align_up(offset, alignof(type_at_t<FieldList, Index>));
}

template <class FieldList, int Index>
SOAHEAP_HD constexpr std::uint64_t soa_array_offset(int capacity) {
  return soa_array_offset_impl<FieldList, Index>(capacity, std::make_integer_sequence<int, Index>{});
}

/// Bytes a block data segment of @p capacity slots needs for all SOA arrays of FieldList.
template <class FieldList>
constexpr std::uint64_t soa_segment_bytes(int capacity) {
  if constexpr (FieldList::size == 0) {
    return 0;
  } else {
    constexpr int last = FieldList::size - 1;
    return soa_array_offset<FieldList, last>(capacity) +
           static_cast<std::uint64_t>(capacity) * sizeof(type_at_t<FieldList, last>);
  }
}

// ---- "which fields can point at T" --------------------------------------------------------------

template <class FieldType>
struct pointee_of_field {
  using type = void;
  static constexpr bool is_array = false;
  static constexpr int extent = 0;
};
template <class Pointee>
struct pointee_of_field<Pointee*> {
  using type = Pointee;
  static constexpr bool is_array = false;
  static constexpr int extent = 1;
};
template <class Pointee, int N>
struct pointee_of_field<array<Pointee*, N>> {
  using type = Pointee;
  static constexpr bool is_array = true;
  static constexpr int extent = N;
};

}  // namespace detail

/// @brief True when a field of type FieldType (a pointer, or a soaheap::array of pointers) can hold a
/// pointer to an object of class T: its pointee is T or a base class of T.
template <class FieldType, class T>
inline constexpr bool field_can_point_to_v = [] {
  using pointee = std::remove_cv_t<typename detail::pointee_of_field<FieldType>::type>;
  if constexpr (std::is_void_v<pointee>) {
    return false;
  } else if constexpr (!is_managed_v<pointee>) {
    return false;
  } else {
    return std::is_base_of_v<pointee, T>;
  }
}();

/// @brief True when FieldType is a pointer or an array of pointers to some managed class.
template <class FieldType>
inline constexpr bool is_managed_pointer_field_v = [] {
  using pointee = std::remove_cv_t<typename detail::pointee_of_field<FieldType>::type>;
  if constexpr (std::is_void_v<pointee>) {
    return false;
  } else {
    return is_managed_v<pointee>;
  }
}();

/// @brief Number of pointer slots a managed pointer field holds (1 for a pointer, N for array<U*, N>).
template <class FieldType>
inline constexpr int pointer_field_extent_v = detail::pointee_of_field<FieldType>::extent;

/// @brief Human-readable class name (from `static constexpr const char* kName`).
template <class T>
constexpr const char* class_name() {
  return T::kName;
}

/// @brief Checks what the reflection DSL requires of a managed class; each message says what to change.
template <class T>
constexpr bool check_managed_class() {
  static_assert(is_managed_v<T>,
                "soaheap: this class is not managed: derive it from soaheap::Object<ThisClass> "
                "(or soaheap::Object<ThisClass, BaseClass>) and declare FieldTypes, kName and its Field members");
  static_assert(std::is_same_v<typename T::soaheap_self, T>,
                "soaheap: a managed class derives from another managed class directly; derive from "
                "soaheap::Object<ThisClass, BaseClass> instead so that soaheap knows its own fields");
  static_assert(!std::is_same_v<typename T::FieldTypes, detail::undeclared_field_types<T>>,
                "soaheap: managed class does not declare its fields: add `using FieldTypes = soaheap::fields<...>;` "
                "(soaheap::fields<> when it has none of its own)");
  static_assert(std::is_void_v<managed_base_t<T>> || std::is_base_of_v<managed_base_t<T>, T>,
                "soaheap: the declared base class of a managed class is not one of its C++ base classes");
  static_assert(T::kName != nullptr,
                "soaheap: managed class has no name: add `static constexpr const char* kName = \"ClassName\";`");
  static_assert(!std::is_polymorphic_v<T>,
                "soaheap: managed classes cannot have virtual functions (objects live in SOA blocks and have no "
                "vtable); dispatch on the class instead");
  static_assert(sizeof(T) < detail::kObjectAlignment,
                "soaheap: too many fields in one class: at most 120 fields including inherited ones");
  return true;
}

}  // namespace soaheap
