#pragma once
/// @file runtime_state.cuh
/// @brief The part of a heap that kernels change at run time and the host reads between kernels:
///        the first recorded error, block accounting, and parallel_do's enumeration clock.

#include <soaheap/base/object_pointer.cuh>
#include <soaheap/base/portability.cuh>
#include <soaheap/core/untyped_layout.cuh>

#include <cstdint>

namespace soaheap {

/// @brief Kinds of errors a kernel can record for the next host call to report.
enum class HeapErrorKind : std::uint32_t {
  none = 0,
  out_of_memory = 1,         ///< no free block and no active block of the class
  allocation_starved = 2,    ///< kMaxAllocationRounds rounds lost to contention
  destroy_of_free_slot = 3,  ///< destroy of an object that is not alive (double destroy)
  destroy_of_foreign_pointer = 4,  ///< destroy of a pointer outside this heap or with a bad slot/class
  untyped_out_of_memory = 5,       ///< soaheap::malloc found no room (the block field holds the size)
  free_of_unallocated_memory = 6,  ///< soaheap::free of memory that is not allocated (double free)
  free_of_foreign_pointer = 7,     ///< soaheap::free of a pointer that malloc of this heap did not return
  invalid_alignment = 8,           ///< soaheap::malloc_aligned with a bad alignment (the block field holds it)
};

namespace detail {

/// Encoded error: kind in bits 0-7, class id in bits 8-15, block id (or payload) in bits 16-63.
SOAHEAP_HD inline std::uint64_t encode_error(HeapErrorKind kind, int class_id, std::uint64_t block) {
  return static_cast<std::uint64_t>(kind) | (static_cast<std::uint64_t>(class_id & 0xff) << 8) | (block << 16);
}

/// The time parallel_do's enumeration launches ran on cuda (HeapOptions::time_enumeration), kept by
/// the launches themselves (EnumerationStamp): consecutive launches alternate between two
/// intervals; each widens its own to the earliest start and the latest end of its warps and folds
/// the other one, which the launch before it filled, into `nanoseconds`.
struct EnumerationClock {
  std::uint64_t inverted_start[2];  ///< ~(earliest start): widened by atomic max, so zero means unused
  std::uint64_t end[2];             ///< latest end
  std::uint64_t nanoseconds;        ///< intervals folded so far

  /// Interval @p slot in nanoseconds; 0 while unused.
  SOAHEAP_HD std::uint64_t interval(int slot) const {
    if (inverted_start[slot] == 0) return 0;
    const std::uint64_t start = ~inverted_start[slot];
    return end[slot] > start ? end[slot] - start : 0;
  }
  /// Everything measured so far, the last launch's interval included.
  SOAHEAP_HD std::uint64_t total_nanoseconds() const { return nanoseconds + interval(0) + interval(1); }
};

/// What a kernel that ran out of blocks and the host thread that maps more tell each other
/// (heap_growth.cuh). The kernel side is device memory: thousands of threads may wait at once, and
/// only one at a time reads the grower's answer from host memory.
struct GrowthChannel {
  std::uint64_t requested;      ///< the most blocks any kernel asked for (atomic max)
  std::uint64_t written;        ///< blocks whose free bits are set: the answers taken so far
  std::uint64_t refused;        ///< the grower's last refusal as taken, or kGrowthGaveUp
  std::uint64_t reader;         ///< 1 while a waiting thread takes the grower's answer
  std::uint64_t answers_taken;  ///< the grower's answer count when it was last taken
  /// Pinned host words (cuda; plain memory on the host backend). Kernels write the first two:
  /// `requested` as the host sees it (only a thread that raised `requested` writes it), and a flag
  /// that a kernel gave up waiting. The grower writes `answer` (kAnswerWords words).
  std::uint64_t* request_signal;
  std::uint64_t* gave_up_signal;
  std::uint64_t* answer;
};
/// The grower's answer: blocks mapped, the last request it could not meet, and the count of its
/// answers (written last; a reader that sees it change takes the other two).
inline constexpr int kAnswerBlocks = 0, kAnswerRefused = 1, kAnswerCount = 2, kAnswerWords = 3;
enum class GrowthRefusal : std::uint64_t { none = 0, max_bytes = 1, device_memory = 2, capacity = 3, no_answer = 4 };
/// `refused` after a kernel waited kGrowthWaitNanoseconds in vain: the kernel's other allocations
/// fail at once instead of each waiting as long (the grower's next answer clears it).
inline constexpr std::uint64_t kGrowthGaveUp = ~std::uint64_t{0};

/// Current regions of each untyped size class, one per group of SMs (on the device a thread uses
/// its SM's number modulo this; decision 028).
inline constexpr std::uint64_t kRegionShards = 8;

/// Device-side state of a heap that changes at runtime (written by the host between kernels).
struct HeapRuntimeState {
  std::uint64_t error;                     ///< first error recorded since the last host check
  /// cuda: a word of mapped host memory that the first error also sets, so that Heap::synchronize
  /// learns whether there is one without a copy; nullptr on the host backend.
  std::uint64_t* error_signal;
  /// Allocations between taking a block from the free bitmap and publishing it as active: while
  /// any is in flight an empty-looking heap is not yet out of memory.
  std::uint64_t blocks_in_transit;
  /// Blocks not in the free bitmap, and the most there have been since the last reset: kept by the
  /// block slow paths so that tracking peak memory needs no statistics kernel.
  std::uint64_t allocated_blocks;
  std::uint64_t peak_allocated_blocks;
  int defrag_threshold[kMaxClasses];       ///< a block is a defrag candidate with at most this many objects
  /// Rounds a diverged lane looks again before it starts a block when the blocks it found had
  /// filled up (kPackedContendedRounds with HeapOptions::pack_allocations, else 0). Set once.
  int contended_rounds;
  UntypedCounters untyped;                 ///< malloc/free counters (untyped_memory.cuh)
  /// Each untyped size class's current regions, kRegionShards words of each class side by side
  /// (detail/current_region.cuh); 0: none yet.
  std::uint64_t untyped_regions[kMaxUntypedClasses * kRegionShards];
  /// A heap that grows: the channel to its grower (nullptr for a fixed heap), the blocks whose free
  /// bits kernels have made visible (their upper bitmap levels set), and the most blocks a kernel may
  /// grow the heap to (the blocks whose headers and bitmap words exist; raised between kernels).
  GrowthChannel* growth;
  std::uint64_t published_blocks;
  std::uint64_t block_limit;
  /// Growable heaps take their free blocks from the lowest window of kLowestFirstLevel (random
  /// within it), so that live blocks gather toward the start and trim() finds whole chunks free at
  /// the end.
  int lowest_first;
  EnumerationClock enumeration_clock;      ///< parallel_do's enumeration time on cuda, when timed
};

}  // namespace detail
}  // namespace soaheap
