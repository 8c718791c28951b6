#pragma once
/// @file object_pointer.cuh
/// @brief Tagged ("fake") object pointers: the address of the block's data segment with the slot,
///        the block capacity and the class id packed into the address bits the hardware leaves unused.
///
/// A field proxy receives such a pointer as `this` (plus its own member offset, always < 128 and
/// absorbed by the 128-byte alignment of data segments), so `p->field` resolves to the right SOA
/// array for any subclass without a table lookup. The heap verifies at creation that its addresses
/// fit into kAddressBits.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap::detail {

inline constexpr int kAddressBits = 47;     ///< user-space virtual addresses on x86-64 and CUDA UVA
inline constexpr int kSlotShift = 47;       ///< 6 bits: slot 0..63
inline constexpr int kCapacityShift = 53;   ///< 6 bits: capacity - 1
inline constexpr int kClassIdShift = 59;    ///< 5 bits: class id 0..31
inline constexpr int kMaxClasses = 32;
inline constexpr int kSlotsPerBlock = 64;   ///< one 64-bit allocation bitmap per block
inline constexpr std::uintptr_t kObjectAlignment = 128;   ///< data segments start on 128-byte boundaries
inline constexpr std::uint64_t kAddressMask = (std::uint64_t{1} << kAddressBits) - 1;

/// The masks are no-ops for valid arguments (the heap checks its addresses at creation); they tell
/// the compiler which bits each part occupies, so that where the class is known at compile time
/// (parallel_do, new) it folds capacity and class back out of the pointer and a field access
/// becomes one multiply-add on the block address, as in hand-written SOA code.
SOAHEAP_HD inline std::uint64_t class_tag_bits(int capacity, int class_id) {
  return ((static_cast<std::uint64_t>(capacity - 1) & 63) << kCapacityShift) |
         ((static_cast<std::uint64_t>(class_id) & 31) << kClassIdShift);
}
SOAHEAP_HD inline std::uint64_t make_object_pointer(std::uint64_t data_address, int slot, int capacity, int class_id) {
  return (data_address & kAddressMask & ~static_cast<std::uint64_t>(kObjectAlignment - 1)) |
         ((static_cast<std::uint64_t>(slot) & 63) << kSlotShift) | class_tag_bits(capacity, class_id);
}

/// make_object_pointer for a loop that builds one pointer per slot of a block (device_do over a
/// partly filled block): the same bits for every valid address (below 2^kAddressBits), but the
/// slot is added before the address mask is applied, so the mask cannot be hoisted out of the loop.
/// nvcc folds capacity and class out of a field access only where it sees the tag bits being made
/// in the same basic block; with the mask hoisted, every field access in such a loop decodes them
/// again (docs/decisions/016-device-do-loops.md). Collision on an H100: 5.19 s with
/// make_object_pointer, 4.76 s with this.
SOAHEAP_HD inline std::uint64_t make_object_pointer_for_slot(std::uint64_t data_address, int slot, int capacity,
                                                             int class_id) {
  constexpr std::uint64_t kAddressAndSlot =
      (kAddressMask | (std::uint64_t{63} << kSlotShift)) & ~static_cast<std::uint64_t>(kObjectAlignment - 1);
  return ((data_address + ((static_cast<std::uint64_t>(slot) & 63) << kSlotShift)) & kAddressAndSlot) |
         class_tag_bits(capacity, class_id);
}

/// Strips a field's member offset, leaving the tagged object pointer.
SOAHEAP_HD inline std::uint64_t object_bits_of(const void* address) {
  return reinterpret_cast<std::uintptr_t>(address) & ~static_cast<std::uint64_t>(kObjectAlignment - 1);
}
SOAHEAP_HD inline std::uint64_t data_address_of(std::uint64_t object_bits) { return object_bits & kAddressMask; }
SOAHEAP_HD inline int slot_of(std::uint64_t object_bits) { return static_cast<int>((object_bits >> kSlotShift) & 63); }
SOAHEAP_HD inline int capacity_of(std::uint64_t object_bits) {
  return static_cast<int>((object_bits >> kCapacityShift) & 63) + 1;
}
SOAHEAP_HD inline int class_id_of(std::uint64_t object_bits) { return static_cast<int>(object_bits >> kClassIdShift); }

}  // namespace soaheap::detail
