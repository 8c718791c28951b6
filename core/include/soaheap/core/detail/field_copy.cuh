#pragma once
/// @file detail/field_copy.cuh
/// @brief Copying objects between SOA slots field by field: a field value in registers
///        (FieldValue, in the widest word its size and alignment allow) and a whole object between
///        two slots of two blocks (ObjectCopy). Compaction moves objects with it (defrag), and
///        migration packs and unpacks them (distributed): both layers include it from here.

#include <soaheap/base/portability.cuh>
#include <soaheap/reflection/class_traits.cuh>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace soaheap::detail {

/// The widest word a field value of FieldType can be loaded and stored in (a byte-wise memcpy would
/// be many small transactions on the GPU).
template <class FieldType>
using field_word_t = std::conditional_t<
    alignof(FieldType) >= 8 && sizeof(FieldType) % 8 == 0, std::uint64_t,
    std::conditional_t<alignof(FieldType) >= 4 && sizeof(FieldType) % 4 == 0, std::uint32_t,
                       std::conditional_t<alignof(FieldType) >= 2 && sizeof(FieldType) % 2 == 0, std::uint16_t,
                                          unsigned char>>>;

/// One field value held in registers between its load and its store.
template <class FieldType>
struct FieldValue {
  using Word = field_word_t<FieldType>;
  static constexpr std::size_t kWords = sizeof(FieldType) / sizeof(Word);
  Word words[kWords];
  SOAHEAP_HD void load(const void* source) {
    for (std::size_t w = 0; w < kWords; ++w) words[w] = static_cast<const Word*>(source)[w];
  }
  SOAHEAP_HD void store(void* destination) const {
    for (std::size_t w = 0; w < kWords; ++w) static_cast<Word*>(destination)[w] = words[w];
  }
};

/// Copies every field of one object of C between two slots of two blocks (SOA arrays). All fields
/// are loaded before the first is stored: field by field, each store would wait for its load before
/// the next field's load could be issued (the compiler may not move a load above a store that might
/// alias it), one memory latency per field instead of one per object.
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
    if constexpr (sizeof...(Fields) > 0) copy_from<Fields...>(from_block, from_slot, to_block, to_slot);
  }
  template <int Field>
  SOAHEAP_HD static std::uint64_t address(std::uint64_t block, int slot) {
    using FieldType = type_at_t<FieldList, Field>;
    return block + soa_array_offset<FieldList, Field>(kCapacity) + static_cast<std::uint64_t>(slot) * sizeof(FieldType);
  }
  /// Loads field Field, then (recursively) loads and stores the later fields, then stores Field.
  template <int Field, int... Later>
  SOAHEAP_HD static void copy_from(std::uint64_t from_block, int from_slot, std::uint64_t to_block, int to_slot) {
    FieldValue<type_at_t<FieldList, Field>> value;
    value.load(reinterpret_cast<const void*>(address<Field>(from_block, from_slot)));
    if constexpr (sizeof...(Later) > 0) copy_from<Later...>(from_block, from_slot, to_block, to_slot);
    value.store(reinterpret_cast<void*>(address<Field>(to_block, to_slot)));
  }
};

}  // namespace soaheap::detail
