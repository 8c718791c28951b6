#pragma once
/// @file detail/untyped_validate.hpp
/// @brief The invariants of untyped memory that Heap::validate() checks on its host copy of the heap.

#include <soaheap/core/untyped_memory.cuh>

#include <cstdint>
#include <ios>
#include <sstream>
#include <string>

namespace soaheap::detail {

/// Throws invariant_violation for @p block of untyped memory.
template <class... Parts>
[[noreturn]] void fail_untyped(std::uint64_t block, const Parts&... parts) {
  std::ostringstream message;
  message << "soaheap: heap invariant broken at block " << block << " (untyped memory): ";
  (message << ... << parts);
  throw invariant_violation(message.str());
}

/// How many untyped states (allocated[k] of a size class, the run bitmap, or a span-body header)
/// claim @p block; also checks active[k] ⇒ allocated[k].
template <class View>
int untyped_owner_count(const View& view, std::uint64_t block) {
  using Layout = typename View::Untyped;
  int owners = Untyped<View>::run_blocks(view).get(block) ? 1 : 0;
  owners += view.headers[block].class_id == kUntypedSpanBodyId ? 1 : 0;
  for (int k = 0; k < Layout::kClassCount; ++k) {
    const bool allocated = Untyped<View>::allocated(view, k).get(block);
    if (Untyped<View>::active(view, k).get(block) && !allocated)
      fail_untyped(block, "active bit of size class ", Layout::chunk_bytes(k), " B set but the block is not allocated to it");
    owners += allocated ? 1 : 0;
  }
  return owners;
}

/// Checks a later block of a span: its first block is a block of a size class whose span covers it,
/// and no slot can be reserved in it.
template <class View>
void validate_span_body(const View& view, std::uint64_t block) {
  using Layout = typename View::Untyped;
  const BlockHeader& header = view.headers[block];
  if (header.allocation != kInvalidatedBitmap)
    fail_untyped(block, "a span's later block has allocation bitmap 0x", std::hex, header.allocation,
                 " instead of all ones (no slot may be reserved in it)");
  const std::uint64_t head = header.run;
  const int size_class = head < block ? Layout::size_class_of_id(view.headers[head].class_id) : -1;
  if (size_class < 0 || !Untyped<View>::allocated(view, size_class).get(head) ||
      block >= head + static_cast<std::uint64_t>(Layout::span(size_class)))
    fail_untyped(block, "span block names block ", head, " as its first, which is no span of a size class covering it");
}

/// Checks a block that exactly one untyped state claims: its header agrees, a chunk block holds a
/// chunk and its active bit matches its fill, a run is contiguous and consistently marked.
template <class View>
void validate_untyped_block(const View& view, std::uint64_t block) {
  using Layout = typename View::Untyped;
  const BlockHeader& header = view.headers[block];
  if (Untyped<View>::run_blocks(view).get(block)) {
    if (header.allocation != kInvalidatedBitmap)
      fail_untyped(block, "a run block's allocation bitmap is 0x", std::hex, header.allocation,
                   " instead of all ones (no object slot may be reserved in it)");
    const std::uint64_t head = header.class_id == kUntypedRunHeadId ? block : header.run;
    if (header.class_id != kUntypedRunHeadId && (header.class_id != kUntypedRunBodyId || head >= block))
      fail_untyped(block, "block in the run bitmap is neither a run head nor a body block after its head (class id 0x",
                   std::hex, header.class_id, ")");
    const BlockHeader& head_header = view.headers[head];
    const std::uint64_t length = head_header.run;
    if (head_header.class_id != kUntypedRunHeadId || length == 0 || head + length > view.block_count ||
        block >= head + length)
      fail_untyped(block, "run block is not covered by its head ", head, " (length ", length, ")");
    if (header.class_id == kUntypedRunHeadId) {
      for (std::uint64_t body = head + 1; body < head + length; ++body)
        if (!Untyped<View>::run_blocks(view).get(body) || view.headers[body].class_id != kUntypedRunBodyId ||
            view.headers[body].run != head)
          fail_untyped(body, "block ", body - head, " of the run that starts at block ", head, " is not marked as part of it");
    }
    return;
  }
  if (header.class_id == kUntypedSpanBodyId) {
    validate_span_body(view, block);
    return;
  }
  int size_class = -1;
  for (int k = 0; k < Layout::kClassCount; ++k)
    if (Untyped<View>::allocated(view, k).get(block)) size_class = k;
  const auto span = static_cast<std::uint64_t>(Layout::span(size_class));
  if (block + span > view.block_count)
    fail_untyped(block, "span of ", span, " blocks of size class ", Layout::chunk_bytes(size_class), " B runs past the heap's end");
  for (std::uint64_t body = block + 1; body < block + span; ++body)
    if (view.headers[body].class_id != kUntypedSpanBodyId || view.headers[body].run != block)
      fail_untyped(body, "block ", body - block, " of the span of size class ", Layout::chunk_bytes(size_class),
                   " B that starts at block ", block, " is not marked as part of it");
  if (header.class_id != Layout::class_id_of(size_class))
    fail_untyped(block, "header class id 0x", std::hex, header.class_id, " does not match the block's size class of ",
                 std::dec, Layout::chunk_bytes(size_class), " B");
  const std::uint64_t full = Layout::full_mask(size_class);
  if ((header.allocation & ~full) != 0)
    fail_untyped(block, "chunks beyond the capacity ", Layout::capacity(size_class), " are marked allocated (bitmap 0x",
                 std::hex, header.allocation, ")");
  if (header.allocation == 0) fail_untyped(block, "allocated block of chunks holds no chunk");
  const bool has_room = (~header.allocation & full) != 0;
  if (Untyped<View>::active(view, size_class).get(block) != has_room)
    fail_untyped(block, "active bit of size class ", Layout::chunk_bytes(size_class), " B is ", !has_room,
                 " but the block holds ", popcount(header.allocation), "/", Layout::capacity(size_class), " chunks");
}

}  // namespace soaheap::detail
