#pragma once
/// @file field.cuh
/// @brief `Field<Owner, Index>`: the proxy members of managed classes. A proxy occupies one byte of
///        the object's C++ layout but stores nothing there; it finds its value in the SOA array of its
///        block from the tagged object pointer it is reached through.

#include <soaheap/base/object_pointer.cuh>
#include <soaheap/base/portability.cuh>
#include <soaheap/reflection/class_traits.cuh>

#include <type_traits>

namespace soaheap {

/// @brief Whether @p T is a field proxy (soaheap::Field or a class derived from one).
template <class T, class = void>
struct is_field : std::false_type {};
template <class T>
struct is_field<T, std::void_t<typename T::soaheap_field_marker>> : std::true_type {};

/// @brief Field number @p Index (0-based, among @p Owner's own fields) of managed class @p Owner.
/// Used like a plain member: read, assign, compound assignment, `->` on pointers, `[]` on arrays.
template <class Owner, int Index>
class Field {
  using own_field_types = typename Owner::FieldTypes;
  static_assert(Index >= 0 && Index < own_field_types::size,
                "soaheap::Field index is out of range: Owner::FieldTypes has fewer entries");

 public:
  using value_type = type_at_t<own_field_types, Index>;
  using soaheap_field_marker = void;  ///< see is_field
  static_assert(std::is_trivially_copyable_v<value_type>,
                "soaheap field types must be trivially copyable (objects are moved by memcpy during defragmentation)");

  Field() = default;
  Field(const Field&) = delete;  // managed objects are never copied as C++ objects: copy field by field

  /// Position of this field among all of Owner's fields, inherited ones first.
  SOAHEAP_HD static constexpr int global_index() { return detail::inherited_field_count<Owner>() + Index; }

  /// @brief Address of this object's value inside the block's SOA array.
  SOAHEAP_HD value_type* address() const {
    const std::uint64_t object = detail::object_bits_of(this);
    const int capacity = detail::capacity_of(object);
    const std::uint64_t array_offset =
        detail::soa_array_offset<all_field_types_t<Owner>, global_index()>(capacity);
    char* const bytes = reinterpret_cast<char*>(detail::data_address_of(object) + array_offset) +
                        static_cast<std::uint64_t>(detail::slot_of(object)) * sizeof(value_type);
#if SOAHEAP_DEVICE_CODE
    // Heap data is always global memory (device or managed). Said so, the compiler emits global
    // loads and stores (LDG/STG) instead of generic ones that check the address window first.
    // (Said of the char pointer: nvcc 13 hands a pointer to a class type, e.g. array<bool, 5>, to
    // the intrinsic unconverted, and NVVM then rejects the module as a broken function.)
    __builtin_assume(__isGlobal(bytes));
#endif
    return reinterpret_cast<value_type*>(bytes);
  }

  SOAHEAP_HD value_type& get() const { return *address(); }
  SOAHEAP_HD operator value_type&() const { return *address(); }

  /// By value, for the same reason as the compound assignments below.
  SOAHEAP_HD Field& operator=(value_type value) {
    *address() = value;
    return *this;
  }
  SOAHEAP_HD Field& operator=(const Field& other) {
    *address() = *other.address();
    return *this;
  }

  /// `p->pointer_field->other_field`
  SOAHEAP_HD value_type operator->() const {
    static_assert(std::is_pointer_v<value_type>, "operator-> is only available on pointer fields");
    return *address();
  }

  /// `p->array_field[i]` for soaheap::array fields
  template <class V = value_type, std::enable_if_t<is_soaheap_array<V>::value, int> = 0>
  SOAHEAP_HD auto& operator[](int element) const {
    return (*address())[element];
  }

  // Compound assignment takes plain operands by value: a reference could not bind to a host
  // constant (`static const float kBoost`) used in device code. Another field is read through its
  // own address (a Field cannot be copied).
#define SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(op)                                               \
  template <class V, std::enable_if_t<!is_field<V>::value, int> = 0>                         \
  SOAHEAP_HD Field& operator op(V value) {                                                   \
    *address() op value;                                                                     \
    return *this;                                                                            \
  }                                                                                          \
  template <class OtherOwner, int OtherIndex>                                                \
  SOAHEAP_HD Field& operator op(const Field<OtherOwner, OtherIndex>& other) {                \
    *address() op other.get();                                                               \
    return *this;                                                                            \
  }
  SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(+=)
  SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(-=)
  SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(*=)
  SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(/=)
  SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(%=)
  SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(&=)
  SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(|=)
  SOAHEAP_FIELD_COMPOUND_ASSIGNMENT(^=)
#undef SOAHEAP_FIELD_COMPOUND_ASSIGNMENT
  SOAHEAP_HD value_type& operator++() { return ++*address(); }
  SOAHEAP_HD value_type operator++(int) { return (*address())++; }
  SOAHEAP_HD value_type& operator--() { return --*address(); }
  SOAHEAP_HD value_type operator--(int) { return (*address())--; }
};

namespace detail {
/// The owner class and the Field type of a pointer to a field proxy member (`&Agent::position`).
template <class Member>
struct member_pointer_traits;
template <class FieldType, class OwnerType>
struct member_pointer_traits<FieldType OwnerType::*> {
  using owner = OwnerType;
  using field = FieldType;
};
}  // namespace detail

}  // namespace soaheap
