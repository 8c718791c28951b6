#pragma once
/// @file untyped_stats.hpp
/// @brief Occupancy of a heap's untyped memory (soaheap::malloc), part of `heap.stats()`.

#include <cstdint>
#include <vector>

namespace soaheap {

/// @brief Occupancy of the blocks of one untyped size class.
struct UntypedSizeClassStats {
  std::uint64_t chunk_bytes = 0;     ///< bytes of each chunk (a request of up to this many bytes lands here)
  int capacity = 0;                  ///< chunks per span
  int span = 1;                      ///< contiguous blocks whose data the chunks of one span share
  std::uint64_t blocks = 0;          ///< blocks holding chunks of this size (every block of each span)
  std::uint64_t used_chunks = 0;     ///< live allocations of this size class
  /// chunks reserved for the class's current region and not handed out yet (given back by
  /// Heap::release_free_memory / soaheap::trim)
  std::uint64_t region_chunks = 0;
  std::uint64_t active_blocks = 0;   ///< spans with a free chunk

  std::uint64_t bytes_reserved() const { return used_chunks * chunk_bytes; }
};

/// @brief Occupancy of all untyped memory of a heap.
///
/// Live figures (blocks, chunks, runs, reserved bytes) come from the block headers; the `_total`
/// counters accumulate since the heap was created (a chunk does not remember how many of its bytes
/// were asked for, so live requested bytes are not known; bytes_requested_total / allocations_total
/// is the mean request).
struct UntypedStats {
  std::uint64_t block_bytes = 0;               ///< bytes of one block's data segment
  std::vector<UntypedSizeClassStats> size_classes;
  std::uint64_t runs = 0;                      ///< live allocations larger than a block
  std::uint64_t run_blocks = 0;                ///< blocks those runs occupy
  std::uint64_t allocations_total = 0;         ///< successful malloc calls
  std::uint64_t bytes_requested_total = 0;     ///< bytes those calls asked for
  std::uint64_t frees_total = 0;               ///< free calls of non-null pointers
  std::uint64_t failures_total = 0;            ///< malloc calls that returned nullptr

  /// @brief Blocks holding untyped memory (chunk blocks and runs).
  std::uint64_t blocks() const {
    std::uint64_t total = run_blocks;
    for (const auto& entry : size_classes) total += entry.blocks;
    return total;
  }
  /// @brief Live untyped allocations.
  std::uint64_t live_allocations() const {
    std::uint64_t total = runs;
    for (const auto& entry : size_classes) total += entry.used_chunks;
    return total;
  }
  /// @brief Bytes handed out to live allocations (chunk sizes and whole run blocks).
  std::uint64_t bytes_reserved() const {
    std::uint64_t total = run_blocks * block_bytes;
    for (const auto& entry : size_classes) total += entry.bytes_reserved();
    return total;
  }
};

}  // namespace soaheap
