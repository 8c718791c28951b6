#pragma once
/// @file untyped_layout.cuh
/// @brief Compile-time layout of untyped memory inside a heap: the size classes that share ordinary
///        blocks, the header class ids that mark untyped blocks, and where their bitmaps lie.
///
/// The chunks of a size class lie in *spans* of s contiguous blocks (1 <= s <= 8), n chunks of
/// s·B/n bytes per span (rounded down to 16 bytes, the alignment every untyped allocation
/// guarantees), n <= 64 because the span's allocation bitmap — the 64-bit word in the header of its
/// first block, as for any block — has 64 bits. The smallest chunk is therefore B/64. Chunk sizes
/// grow by at most about 8 % per class (wider only among the smallest chunks, multiples of 16
/// bytes, and from 8/9 of a block to a whole block, where no s <= 8 gives a finer fraction), so a
/// request wastes little of its chunk and the chunks fill their span;
/// a span of one block is chosen wherever it is nearly as good as a longer one, because a span must
/// find s contiguous free blocks. The largest class is a whole block (requests of a whole block or
/// more take a run of contiguous blocks; the class serves requests whose own class is full)
/// (docs/decisions/026-untyped-size-classes-span-blocks.md).

#include <soaheap/base/portability.cuh>

#include <cstdint>
#include <utility>

namespace soaheap::detail {

/// Every untyped allocation starts on this boundary (chunk sizes are multiples of it).
inline constexpr std::uint64_t kUntypedAlignment = 16;
/// Largest alignment the aligned variant can honour: data segments start on 128-byte boundaries.
inline constexpr std::uint64_t kMaxUntypedAlignment = 128;
/// Longest span: blocks one size class's chunks may share.
inline constexpr int kMaxUntypedSpan = 8;
/// Each size class's chunk is at most this many thousandths larger than the one before (where a
/// span of at most kMaxUntypedSpan blocks allows it).
inline constexpr std::uint64_t kUntypedClassStepPermille = 80;
/// Bound on the number of size classes (the table's arrays).
inline constexpr int kMaxUntypedClasses = 128;

/// Header class ids of untyped blocks: far above every managed class id (< 32) and below kNoClass,
/// so code that walks managed classes skips them without knowing about them.
inline constexpr std::uint32_t kUntypedClassIdBase = 0x40000000u;
/// Header class id of the first block of a run (its `iteration` field holds the run length).
inline constexpr std::uint32_t kUntypedRunHeadId = kUntypedClassIdBase + 0x100u;
/// Header class id of the other blocks of a run (their `iteration` field holds the head's id).
inline constexpr std::uint32_t kUntypedRunBodyId = kUntypedClassIdBase + 0x101u;
/// Header class id a run's head takes while it is being freed (a second free loses the race).
inline constexpr std::uint32_t kUntypedRunFreedId = kUntypedClassIdBase + 0x102u;
/// Header class id of the blocks of a span after its first (their `iteration` field holds the
/// first block's index; the first block carries the size class and the allocation bitmap).
inline constexpr std::uint32_t kUntypedSpanBodyId = kUntypedClassIdBase + 0x103u;

SOAHEAP_HD constexpr std::uint64_t untyped_align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// @brief The untyped size classes of blocks with @p DataBytes bytes of data.
template <std::uint64_t DataBytes>
struct UntypedLayout {
  static constexpr std::uint64_t kBlockBytes = DataBytes;
  static constexpr std::uint64_t kSmallestChunk = untyped_align_up((DataBytes + 63) / 64, kUntypedAlignment);
  static_assert(kSmallestChunk <= DataBytes, "soaheap: a block is too small for one untyped chunk");

  struct Table {
    int count = 0;
    std::uint64_t chunk_bytes[kMaxUntypedClasses] = {};
    int capacity[kMaxUntypedClasses] = {};
    int span[kMaxUntypedClasses] = {};
  };
  /// Chunk bytes of @p n chunks in a span of @p s blocks.
  static constexpr std::uint64_t span_chunk(int s, int n) {
    return static_cast<std::uint64_t>(s) * DataBytes / static_cast<std::uint64_t>(n) / kUntypedAlignment * kUntypedAlignment;
  }
  /// The ladder: from the smallest chunk up to a whole block, each class the largest chunk within
  /// kUntypedClassStepPermille of the one before, of the shortest span that reaches at least half of
  /// that step (the smallest larger chunk where no span reaches the step at all).
  static constexpr Table make_table() {
    Table table;
    std::uint64_t previous = 0;
    while (previous < DataBytes && table.count < kMaxUntypedClasses) {
      std::uint64_t step = previous * kUntypedClassStepPermille / 1000;
      if (step < kUntypedAlignment) step = kUntypedAlignment;
      const std::uint64_t limit = previous == 0 ? kSmallestChunk : (previous + step) / kUntypedAlignment * kUntypedAlignment;
      std::uint64_t within[kMaxUntypedSpan + 1] = {};  // per span: the largest chunk in (previous, limit]
      int within_n[kMaxUntypedSpan + 1] = {};
      std::uint64_t widest = 0;
      std::uint64_t above = 0;  // the smallest chunk above previous, of any span
      int above_s = 0;
      int above_n = 0;
      for (int s = 1; s <= kMaxUntypedSpan; ++s) {
        for (int n = s; n <= 64; ++n) {
          const std::uint64_t chunk = span_chunk(s, n);
          if (chunk < kSmallestChunk) break;
          if (chunk <= previous) break;  // smaller n gave larger chunks; the rest are smaller still
          if (chunk <= limit && within[s] == 0) {
            within[s] = chunk;
            within_n[s] = n;
            if (chunk > widest) widest = chunk;
          }
          if (above == 0 || chunk < above || (chunk == above && s < above_s)) {
            above = chunk;
            above_s = s;
            above_n = n;
          }
        }
      }
      int s = 1;
      std::uint64_t chunk = 0;
      int n = 0;
      if (widest == 0) {
        s = above_s;
        chunk = above;
        n = above_n;
      } else {
        for (s = 1; s <= kMaxUntypedSpan; ++s)
          if (within[s] != 0 && within[s] >= previous + (widest - previous) / 2) break;
        chunk = within[s];
        n = within_n[s];
      }
      // As many chunks as the span holds (a smaller n may give the same rounded chunk).
      const std::uint64_t fits = static_cast<std::uint64_t>(s) * DataBytes / chunk;
      n = fits < 64 ? static_cast<int>(fits) : 64;
      table.chunk_bytes[table.count] = chunk;
      table.capacity[table.count] = n;
      table.span[table.count] = s;
      ++table.count;
      previous = chunk;
    }
    return table;
  }
  static constexpr Table kTable = make_table();
  /// Number of size classes; the last one has chunks of a whole block.
  static constexpr int kClassCount = kTable.count;
  /// Largest request served by a size class; larger ones take runs of blocks.
  static constexpr std::uint64_t kLargestChunk = kTable.chunk_bytes[kClassCount - 1];
  static_assert(kLargestChunk == DataBytes, "soaheap: the largest untyped size class must be one block");
  static_assert(kTable.span[kClassCount - 1] == 1 && kTable.capacity[kClassCount - 1] == 1,
                "soaheap: the largest untyped size class must be one chunk of one block");
  /// Bitmaps: allocated[k] and active[k] for every size class k, then one of the blocks in runs.
  static constexpr int kBitmapCount = 2 * kClassCount + 1;

  // Indexed through a fold over constant indices: the table itself never has to exist in device memory.
  SOAHEAP_HD static constexpr std::uint64_t chunk_bytes(int size_class) {
    return chunk_bytes_of(size_class, std::make_integer_sequence<int, kClassCount>{});
  }
  /// Chunks per span.
  SOAHEAP_HD static constexpr int capacity(int size_class) {
    return capacity_of(size_class, std::make_integer_sequence<int, kClassCount>{});
  }
  /// Blocks per span.
  SOAHEAP_HD static constexpr int span(int size_class) {
    return span_of(size_class, std::make_integer_sequence<int, kClassCount>{});
  }
  SOAHEAP_HD static constexpr std::uint64_t full_mask(int size_class) { return low_bits(capacity(size_class)); }
  /// Smallest size class whose chunks hold @p bytes bytes at @p alignment; -1 when none does (a run).
  SOAHEAP_HD static constexpr int size_class_for(std::uint64_t bytes, std::uint64_t alignment = kUntypedAlignment) {
    // Chunk sizes increase with the class: the smallest class that holds the request is the number
    // of classes whose chunks are smaller (one pass of compares, no search).
    int k = classes_below(bytes, std::make_integer_sequence<int, kClassCount>{});
    if (alignment > kUntypedAlignment)
      while (k < kClassCount && chunk_bytes(k) % alignment != 0) ++k;
    return k < kClassCount ? k : -1;
  }
  SOAHEAP_HD static constexpr std::uint32_t class_id_of(int size_class) {
    return kUntypedClassIdBase + static_cast<std::uint32_t>(size_class);
  }
  /// Size class of header class id @p id, or -1 when it is no untyped size class.
  SOAHEAP_HD static constexpr int size_class_of_id(std::uint32_t id) {
    return id >= kUntypedClassIdBase && id < kUntypedClassIdBase + static_cast<std::uint32_t>(kClassCount)
               ? static_cast<int>(id - kUntypedClassIdBase)
               : -1;
  }

 private:
  // Scalar constants: device code may use them, unlike members of the table object.
  template <int Index>
  static constexpr std::uint64_t kChunkBytesAt = kTable.chunk_bytes[Index];
  template <int Index>
  static constexpr int kCapacityAt = kTable.capacity[Index];
  template <int Index>
  static constexpr int kSpanAt = kTable.span[Index];

  template <int... Index>
  SOAHEAP_HD static constexpr std::uint64_t chunk_bytes_of(int size_class, std::integer_sequence<int, Index...>) {
    std::uint64_t result = 0;
    ((result = size_class == Index ? kChunkBytesAt<Index> : result), ...);
    return result;
  }
  template <int... Index>
  SOAHEAP_HD static constexpr int capacity_of(int size_class, std::integer_sequence<int, Index...>) {
    int result = 0;
    ((result = size_class == Index ? kCapacityAt<Index> : result), ...);
    return result;
  }
  template <int... Index>
  SOAHEAP_HD static constexpr int span_of(int size_class, std::integer_sequence<int, Index...>) {
    int result = 1;
    ((result = size_class == Index ? kSpanAt<Index> : result), ...);
    return result;
  }
  template <int... Index>
  SOAHEAP_HD static constexpr int classes_below(std::uint64_t bytes, std::integer_sequence<int, Index...>) {
    return ((kChunkBytesAt<Index> < bytes ? 1 : 0) + ...);
  }
};

/// Cumulative counters of untyped memory, kept on the device (aggregated per warp).
struct UntypedCounters {
  std::uint64_t allocations;      ///< successful malloc calls since the heap was created
  std::uint64_t bytes_requested;  ///< bytes those calls asked for
  std::uint64_t frees;            ///< free calls of non-null pointers
  std::uint64_t failures;         ///< malloc calls that returned nullptr
};

}  // namespace soaheap::detail
