#pragma once
/// @file untyped_layout.cuh
/// @brief Compile-time layout of untyped memory inside a heap: the size classes that share ordinary
///        blocks, the header class ids that mark untyped blocks, and where their bitmaps lie.
///
/// A block of untyped memory holds chunks of one size class, at most 64 of them because the
/// block's allocation bitmap has 64 bits; the smallest chunk is therefore the block's data bytes
/// divided by 64, rounded up to 16 bytes (the alignment every untyped allocation guarantees).
/// Chunk sizes then grow by about a fifth per class, so that a request wastes little of its chunk,
/// up to a whole block. Requests above a block take a run of contiguous blocks.

#include <soaheap/base/portability.cuh>

#include <cstdint>
#include <utility>

namespace soaheap::detail {

/// Every untyped allocation starts on this boundary (chunk sizes are multiples of it).
inline constexpr std::uint64_t kUntypedAlignment = 16;
/// Largest alignment the aligned variant can honour: data segments start on 128-byte boundaries.
inline constexpr std::uint64_t kMaxUntypedAlignment = 128;
/// Chunks per block tried for the size classes, largest first; classes whose chunk size would
/// repeat or fall below the smallest chunk are dropped.
inline constexpr int kUntypedCapacityLadder[] = {64, 53, 44, 37, 32, 26, 22, 18, 16, 13, 11,
                                                 9,  8,  7,  6,  5,  4,  3,  2,  1};
inline constexpr int kMaxUntypedClasses = static_cast<int>(sizeof(kUntypedCapacityLadder) / sizeof(int));

/// Header class ids of untyped blocks: far above every managed class id (< 32) and below kNoClass,
/// so code that walks managed classes skips them without knowing about them.
inline constexpr std::uint32_t kUntypedClassIdBase = 0x40000000u;
/// Header class id of the first block of a run (its `iteration` field holds the run length).
inline constexpr std::uint32_t kUntypedRunHeadId = kUntypedClassIdBase + 0x100u;
/// Header class id of the other blocks of a run (their `iteration` field holds the head's id).
inline constexpr std::uint32_t kUntypedRunBodyId = kUntypedClassIdBase + 0x101u;
/// Header class id a run's head takes while it is being freed (a second free loses the race).
inline constexpr std::uint32_t kUntypedRunFreedId = kUntypedClassIdBase + 0x102u;

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
  };
  static constexpr Table make_table() {
    Table table;
    for (int n : kUntypedCapacityLadder) {
      std::uint64_t chunk = DataBytes / static_cast<std::uint64_t>(n) / kUntypedAlignment * kUntypedAlignment;
      if (chunk < kSmallestChunk) chunk = kSmallestChunk;
      if (table.count > 0 && chunk <= table.chunk_bytes[table.count - 1]) continue;
      std::uint64_t capacity = DataBytes / chunk;
      if (capacity > 64) capacity = 64;
      table.chunk_bytes[table.count] = chunk;
      table.capacity[table.count] = static_cast<int>(capacity);
      ++table.count;
    }
    return table;
  }
  static constexpr Table kTable = make_table();
  /// Number of size classes; the last one has chunks of a whole block.
  static constexpr int kClassCount = kTable.count;
  /// Largest request served by a size class; larger ones take runs of blocks.
  static constexpr std::uint64_t kLargestChunk = kTable.chunk_bytes[kClassCount - 1];
  static_assert(kLargestChunk == DataBytes, "soaheap: the largest untyped size class must be one block");
  /// Bitmaps: allocated[k] and active[k] for every size class k, then one of the blocks in runs.
  static constexpr int kBitmapCount = 2 * kClassCount + 1;

  // Indexed through a fold over constant indices: the table itself never has to exist in device memory.
  SOAHEAP_HD static constexpr std::uint64_t chunk_bytes(int size_class) {
    return chunk_bytes_of(size_class, std::make_integer_sequence<int, kClassCount>{});
  }
  SOAHEAP_HD static constexpr int capacity(int size_class) {
    return capacity_of(size_class, std::make_integer_sequence<int, kClassCount>{});
  }
  SOAHEAP_HD static constexpr std::uint64_t full_mask(int size_class) { return low_bits(capacity(size_class)); }
  /// Smallest size class whose chunks hold @p bytes bytes at @p alignment; -1 when none does (a run).
  SOAHEAP_HD static constexpr int size_class_for(std::uint64_t bytes, std::uint64_t alignment = kUntypedAlignment) {
    for (int k = 0; k < kClassCount; ++k)
      if (chunk_bytes(k) >= bytes && chunk_bytes(k) % alignment == 0) return k;
    return -1;
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
};

/// Cumulative counters of untyped memory, kept on the device (aggregated per warp).
struct UntypedCounters {
  std::uint64_t allocations;      ///< successful malloc calls since the heap was created
  std::uint64_t bytes_requested;  ///< bytes those calls asked for
  std::uint64_t frees;            ///< free calls of non-null pointers
  std::uint64_t failures;         ///< malloc calls that returned nullptr
};

}  // namespace soaheap::detail
