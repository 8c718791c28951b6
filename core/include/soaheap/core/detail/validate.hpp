#pragma once
/// @file detail/validate.hpp
/// @brief Heap::validate(): every invariant of DESIGN.md, checked on a host copy of the heap.

#include <soaheap/core/detail/untyped_validate.hpp>
#include <soaheap/core/heap.cuh>

#include <sstream>
#include <string>

namespace soaheap {
namespace detail {

/// Collects the first broken invariant with its block and class, and throws it.
class InvariantReport {
 public:
  template <class... Parts>
  [[noreturn]] static void fail(std::uint64_t block, const char* class_name, const Parts&... parts) {
    std::ostringstream message;
    message << "soaheap: heap invariant broken at block " << block;
    if (class_name != nullptr) message << " (class " << class_name << ")";
    message << ": ";
    (message << ... << parts);
    throw invariant_violation(message.str());
  }
};

/// True when runtime class @p class_index of the heap is Pointee or derives from it.
template <class Pointee, class... Classes>
bool class_derives_from(int class_index) {
  int index = 0;
  bool result = false;
  ((result = (index++ == class_index) ? std::is_base_of_v<Pointee, Classes> : result), ...);
  return result;
}

}  // namespace detail

template <class... Classes>
void Heap<Classes...>::validate(Validation level) const {
  const Snapshot snapshot = take_snapshot(level == Validation::full);
  const Internals& view = snapshot.view;

  // 1. Every bitmap level agrees with the one below (but for the run bitmap, which keeps level 0
  //    alone), and no bit lies beyond the heap.
  for (int b = 0; b < Internals::kBitmapCount; ++b) {
    const BitmapView bitmap = view.bitmap(b);
    const BitmapShape& shape = snapshot.shape;
    for (int level = 0; level < shape.level_count; ++level) {
      const std::uint64_t bits = level == 0 ? block_count_ : shape.level_words[level - 1];
      for (std::uint64_t w = 0; w < shape.level_words[level]; ++w) {
        const std::uint64_t value = bitmap.word(level, w);
        const std::uint64_t first = w * 64;
        const int valid_bits = bits > first ? static_cast<int>(bits - first < 64 ? bits - first : 64) : 0;
        if ((value & ~detail::low_bits(valid_bits)) != 0)
          detail::InvariantReport::fail(first, nullptr, "bitmap ", b, " level ", level, " word ", w,
                                        " has bits set beyond its size");
        if (level + 1 < shape.level_count && b != Internals::kRunBitmap) {
          const bool parent = (bitmap.word(level + 1, w / 64) >> (w % 64)) & 1u;
          if (parent != (value != 0))
            detail::InvariantReport::fail(first, nullptr, "bitmap ", b, " level ", level + 1, " bit ", w, " is ",
                                          parent, " but the word below is ", value != 0 ? "non-empty" : "empty");
        }
      }
    }
  }

  // 2. Each block is free or allocated to exactly one class, and its header and states agree.
  std::uint64_t blocks_in_use = 0;
  // Blocks the device has published, as copied with the bitmaps: the grower may have mapped more
  // since (a request left over by a finished kernel), whose free bits nobody has set yet.
  const std::uint64_t published = snapshot.state.published_blocks;
  for (std::uint64_t block = 0; block < block_count_; ++block) {
    const BlockHeader& header = view.headers[block];
    const bool is_free = view.free_blocks().get(block);
    if (block >= published) {  // a growable heap's block without memory or not yet published: in no bitmap
      bool listed = is_free || detail::untyped_owner_count(view, block) != 0;
      for (int c = 0; c < kClassCount; ++c) listed = listed || view.allocated_blocks(c).get(block);
      if (listed) detail::InvariantReport::fail(block, nullptr, "block above the ", published, " published blocks is in a bitmap");
      continue;
    }
    blocks_in_use += is_free ? 0 : 1;
    int owners = 0;
    int owner = -1;
    for (int c = 0; c < kClassCount; ++c) {
      const bool allocated = view.allocated_blocks(c).get(block);
      const bool active = view.active_blocks(c).get(block);
      const bool candidate = view.defrag_candidates(c).get(block);
      if (allocated) {
        ++owners;
        owner = c;
      }
      if (active && !allocated)
        detail::InvariantReport::fail(block, class_name(c), "active bit set but the block is not allocated to the class");
      if (candidate && !active)
        detail::InvariantReport::fail(block, class_name(c), "defrag-candidate bit set but the block is not active");
    }
    const int untyped_owners = detail::untyped_owner_count(view, block);
    if (is_free + owners + untyped_owners != 1)
      detail::InvariantReport::fail(block, owner >= 0 ? class_name(owner) : nullptr, "block is ",
                                    is_free ? "free and " : "", "allocated to ", owners, " classes and ",
                                    untyped_owners, " untyped states (must be exactly one of free / allocated[T] / untyped)");
    if (is_free) {
      if (header.allocation != detail::kInvalidatedBitmap)
        detail::InvariantReport::fail(block, nullptr, "free block's allocation bitmap is 0x", std::hex,
                                      header.allocation, " instead of all ones (invalidated)");
      continue;
    }
    if (untyped_owners != 0) {
      detail::validate_untyped_block(view, block);
      continue;
    }
    if (header.class_id != static_cast<std::uint32_t>(owner))
      detail::InvariantReport::fail(block, class_name(owner), "header says class id ", header.class_id,
                                    " but the block is in allocated[", class_name(owner), "]");
    const int capacity_c = capacity_of_class(owner);
    if ((header.allocation & ~Internals::full_mask(owner)) != 0)
      detail::InvariantReport::fail(block, class_name(owner), "slots beyond the capacity ", capacity_c,
                                    " are marked allocated (bitmap 0x", std::hex, header.allocation, ")");
    const int fill = detail::popcount(header.allocation);
    if (fill == 0) detail::InvariantReport::fail(block, class_name(owner), "allocated block holds no object");
    const bool active = view.active_blocks(owner).get(block);
    if (active != (fill < capacity_c))
      detail::InvariantReport::fail(block, class_name(owner), active ? "active bit set but the block is full (" : "",
                                    active ? "" : "active bit clear but the block has free slots (", fill, "/",
                                    capacity_c, " objects)");
    const bool candidate = view.defrag_candidates(owner).get(block);
    const int threshold = snapshot.state.defrag_threshold[owner];
    if (candidate != (fill <= threshold))
      detail::InvariantReport::fail(block, class_name(owner), "defrag-candidate bit is ", candidate, " but the block holds ",
                                    fill, "/", capacity_c, " objects and the candidate threshold is ", threshold);
  }

  if (snapshot.state.allocated_blocks != blocks_in_use || snapshot.state.peak_allocated_blocks < blocks_in_use)
    detail::InvariantReport::fail(0, nullptr, "the allocator's block counter says ", snapshot.state.allocated_blocks,
                                  " blocks in use (peak ", snapshot.state.peak_allocated_blocks, ") but ",
                                  blocks_in_use, " blocks are not free");

  if (level != Validation::full) return;

  // 3. Every reflected pointer field is null or points to a live object of a fitting class.
  const std::uint64_t real_base = reinterpret_cast<std::uint64_t>(data_.get());
  auto check_pointer = [&](std::uint64_t bits, auto pointee_tag, std::uint64_t holder_block, int holder_class,
                           int field, int slot) {
    using Pointee = detail::tag_type_t<decltype(pointee_tag)>;
    if (bits == 0) return;
    auto fail = [&](const char* what) {
      detail::InvariantReport::fail(holder_block, class_name(holder_class), "slot ", slot, " field ", field,
                                    " holds pointer 0x", std::hex, bits, std::dec, ": ", what);
    };
    const int target_class = detail::class_id_of(bits);
    const std::uint64_t address = detail::data_address_of(bits);
    if (target_class >= kClassCount) fail("unknown class id in the pointer tag");
    if (address < real_base || (address - real_base) % Layout::kDataBytes != 0 ||
        (address - real_base) / Layout::kDataBytes >= block_count_)
      fail("does not point to a block of this heap");
    const std::uint64_t target_block = (address - real_base) / Layout::kDataBytes;
    const int target_slot = detail::slot_of(bits);
    if (detail::capacity_of(bits) != capacity_of_class(target_class)) fail("capacity tag does not match its class");
    if (!detail::class_derives_from<Pointee, Classes...>(target_class))
      fail("points to an object of a class that is not the field's pointee class or a subclass of it");
    if (view.free_blocks().get(target_block)) fail("points into a free block (a moved or destroyed object)");
    if (view.headers[target_block].class_id != static_cast<std::uint32_t>(target_class))
      fail("points into a block of another class");
    if (((view.headers[target_block].allocation >> target_slot) & 1u) == 0)
      fail("points to a free slot (a moved or destroyed object)");
  };
  auto check_class = [&](auto class_tag) {
    using C = detail::tag_type_t<decltype(class_tag)>;
    using FieldList = all_field_types_t<C>;
    constexpr int kCapacity = Layout::template capacity<C>;
    const BitmapView allocated = view.allocated_blocks(class_id<C>);
    for (std::uint64_t block = 0; block < block_count_; ++block) {
      if (!allocated.get(block)) continue;
      const std::uint64_t objects = view.headers[block].allocation & Internals::full_mask(class_id<C>);
      detail::for_each_index<FieldList::size>([&](auto field_index) {
        constexpr int kField = std::decay_t<decltype(field_index)>::value;
        using FieldType = type_at_t<FieldList, kField>;
        if constexpr (is_managed_pointer_field_v<FieldType>) {
          using Pointee = std::remove_cv_t<typename detail::pointee_of_field<FieldType>::type>;
          const auto* values = reinterpret_cast<const FieldType*>(
              view.data_address(block) + detail::soa_array_offset<FieldList, kField>(kCapacity));
          for (int slot = 0; slot < kCapacity; ++slot) {
            if (((objects >> slot) & 1u) == 0) continue;
            const auto* pointers = reinterpret_cast<const std::uint64_t*>(&values[slot]);
            for (int k = 0; k < pointer_field_extent_v<FieldType>; ++k)
              check_pointer(pointers[k], typename Internals::template type_tag<Pointee>{}, block, class_id<C>, kField, slot);
          }
        }
      });
    }
  };
  (
      [&] {
        if constexpr (!Classes::kAbstract) check_class(typename Internals::template type_tag<Classes>{});
      }(),
      ...);
}

}  // namespace soaheap
