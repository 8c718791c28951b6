#pragma once
/// @file order.cuh
/// @brief Orders for `soaheap::defragment<T>(heap, options, order)` (ordered compaction): what
///        integer key each object of T gets, ascending keys being the order the objects end in.
///
/// An order is a small trivially copyable struct with
///  - `template <class View, class C> SOAHEAP_HD std::uint64_t key(const View&, C* object) const`:
///    the key of one object, read on the device (or a host worker) before anything moves;
///  - `template <class View> int key_bits(const View&) const`: how many low bits of the keys can be
///    non-zero (the radix sort looks at no more), 1..64.
/// Two are provided: order_by_pointer_field (the objects follow what a pointer field points to:
/// agents that point at their grid cell end up in the cells' memory order) and order_by_key (any
/// device functor of the object returning an unsigned integer).

#include <soaheap/base/object_pointer.cuh>
#include <soaheap/base/portability.cuh>
#include <soaheap/reflection/field.cuh>

#include <cstdint>
#include <type_traits>

namespace soaheap {

namespace detail {
/// Bits needed to write @p value (0 for 0).
constexpr int bit_width(std::uint64_t value) {
  int bits = 0;
  while (value != 0) {
    ++bits;
    value >>= 1;
  }
  return bits;
}
}  // namespace detail

/// @brief Orders objects by the heap position (block, then slot) of the object their pointer field
/// @p Member refers to; objects whose field is null come last. Made by order_by_pointer_field().
template <auto Member>
struct PointerFieldOrder {
  using Owner = typename detail::member_pointer_traits<decltype(Member)>::owner;
  using FieldType = typename detail::member_pointer_traits<decltype(Member)>::field;
  static_assert(std::is_pointer_v<typename FieldType::value_type>,
                "soaheap::order_by_pointer_field needs a pointer field (Field<Owner, I> of a T* type)");

  template <class View, class C>
  SOAHEAP_HD std::uint64_t key(const View& view, C* object) const {
    static_assert(std::is_base_of_v<Owner, C>, "soaheap::order_by_pointer_field: the field is not a field of this class");
    const auto target = (static_cast<Owner*>(object)->*Member).get();
    // Null sorts after every object of the heap: block_count * 64 is past the last slot.
    if (target == nullptr) return view.block_count * kSlotsPerBlock;
    const std::uint64_t bits = detail::object_bits_of(target);
    return view.block_of(bits) * kSlotsPerBlock + static_cast<std::uint64_t>(detail::slot_of(bits));
  }
  template <class View>
  int key_bits(const View& view) const {
    return detail::bit_width(view.block_count * kSlotsPerBlock);
  }

 private:
  static constexpr std::uint64_t kSlotsPerBlock = 64;
};

/// @brief Orders objects by the heap position of what @p Member (e.g. `&Agent::position`) points to.
template <auto Member>
constexpr PointerFieldOrder<Member> order_by_pointer_field() {
  return {};
}

/// @brief Orders objects by where they are now (block, then slot): an ordered compaction with it
/// keeps the objects' order and moves them into the lowest free blocks, which is how soaheap::trim
/// gathers a growable heap's objects at its start. Made by order_by_position().
struct PositionOrder {
  template <class View, class C>
  SOAHEAP_HD std::uint64_t key(const View& view, C* object) const {
    const std::uint64_t bits = detail::object_bits_of(object);
    return view.block_of(bits) * 64 + static_cast<std::uint64_t>(detail::slot_of(bits));
  }
  template <class View>
  int key_bits(const View& view) const {
    return detail::bit_width(view.block_count * 64);
  }
};
constexpr PositionOrder order_by_position() { return {}; }

/// @brief Orders objects by `key_of(object)`, an unsigned integer computed on the device (a
/// trivially copyable functor taking `C*`), of which only the low @p Bits bits may be non-zero.
/// Made by order_by_key().
template <class KeyOf, int Bits>
struct KeyOrder {
  static_assert(Bits >= 1 && Bits <= 64, "soaheap::order_by_key: key bits must be in 1..64");
  KeyOf key_of;

  template <class View, class C>
  SOAHEAP_HD std::uint64_t key(const View&, C* object) const {
    return static_cast<std::uint64_t>(key_of(object));
  }
  template <class View>
  int key_bits(const View&) const {
    return Bits;
  }
};

/// @brief Orders objects by @p key_of(object) (see KeyOrder). When the keys fit into fewer bits,
/// say so (`order_by_key<20>(...)`): the sort then looks at those bits only.
template <int Bits = 64, class KeyOf>
constexpr KeyOrder<KeyOf, Bits> order_by_key(KeyOf key_of) {
  return {key_of};
}

}  // namespace soaheap
