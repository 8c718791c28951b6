#pragma once
/// @file defrag_options.hpp
/// @brief The plain option and result types of `soaheap::defragment` / `Heap::defrag`. They depend
///        on nothing else so that heap.cuh can declare its `defrag` member before the algorithm is
///        defined (defragment.cuh is included at the end of heap.cuh).

#include <cstdint>
#include <string>

namespace soaheap {

/// @brief How the pointer-rewrite phase finds the new location of a moved object.
enum class RewriteStrategy {
  forwarding_pointers,  ///< the copy leaves the new address in the source block's data segment (paper §3.4)
  records,              ///< per-pass records of the blocks' bitmaps; the new slot is recomputed (paper §3.8)
};

/// @brief Options of one defragmentation run.
struct DefragOptions {
  int factor = 0;                      ///< n: merge n+1 blocks into n; 0 = the heap's current factor for the class
  long long retained_candidates = 0;   ///< k1: stop once at most this many candidate blocks remain
  long long min_compactions = 1;       ///< a pass runs only if it has at least this many source blocks
  RewriteStrategy strategy = RewriteStrategy::forwarding_pointers;
};

/// @brief Wall-clock milliseconds spent in each phase, summed over all passes (and subclasses).
struct DefragPhaseTimes {
  double scan_ms = 0, copy_ms = 0, forward_ms = 0, rewrite_ms = 0, state_ms = 0;
  double total_ms() const { return scan_ms + copy_ms + forward_ms + rewrite_ms + state_ms; }
};

/// @brief What one defragmentation run did.
struct DefragResult {
  std::string class_name;                  ///< the class that was asked for (a base covers its subclasses)
  int passes = 0;                          ///< passes that moved objects (summed over concrete subclasses)
  std::uint64_t blocks_freed = 0;          ///< source blocks returned to the free state
  std::uint64_t objects_moved = 0;         ///< relocated objects
  std::uint64_t bytes_moved = 0;           ///< bytes of field data copied
  std::uint64_t candidates_before = 0;     ///< defrag-candidate blocks before / after the run
  std::uint64_t candidates_after = 0;
  double fragmentation_before = 0;         ///< paper's F over the covered classes, before / after
  double fragmentation_after = 0;
  DefragPhaseTimes times;
};

}  // namespace soaheap
