#pragma once
/// @file defrag_options.hpp
/// @brief The plain option and result types of `soaheap::defragment` (defragment.cuh) and the
///        policies. They depend on nothing else, so that the profiler and the DynaSOAr shim can use them
///        without the algorithm's device code.

#include <cstdint>
#include <string>

namespace soaheap {

/// @brief How the pointer-rewrite phase finds the new location of a moved object.
enum class RewriteStrategy {
  forwarding_pointers,  ///< the copy leaves the new address in the source block's data segment (paper §3.4)
  records,              ///< per-pass records of the blocks' bitmaps; the new slot is recomputed (paper §3.8)
};

/// @brief How the objects to move and their destinations are chosen.
enum class CompactionStrategy {
  /// One compaction plan computed on the device: the emptiest candidates are emptied into the free
  /// slots of the fullest, every object moves at most once, one pointer-rewrite scan, no host
  /// round trip until the final counts (see defrag/detail/compaction_plan.cuh).
  plan,
  /// The ISMM 2019 algorithm: passes that each merge n+1 candidates into n, until at most k1 remain.
  passes,
};

/// @brief Which blocks a defragmentation run compacts.
enum class DefragTarget {
  /// The candidates (fill <= n/(n+1)). Afterwards (k1 = 0) every block is more than n/(n+1) full
  /// except at most one per class (per locality window) with the plan, and at most n leftover
  /// candidates with the passes; those may be nearly empty (one object in one block stays so), so
  /// the paper's "fragmentation <= 1/(n+1)" holds only apart from them.
  bound,
  minimum,  ///< every block with a free slot: afterwards ceil(live/N_T) blocks, at most one partly filled (plan only)
};

/// @brief Options of one defragmentation run.
struct DefragOptions {
  int factor = 0;                      ///< n: merge n+1 blocks into n; 0 = the heap's current factor for the class
  long long retained_candidates = 0;   ///< k1: stop once at most this many candidate blocks remain
  long long min_compactions = 1;       ///< a pass runs only if it has at least this many source blocks
  RewriteStrategy strategy = RewriteStrategy::forwarding_pointers;
  CompactionStrategy compaction = CompactionStrategy::plan;
  DefragTarget target = DefragTarget::bound;
  /// Locality (plan only): 0 compacts each class as a whole; W > 0 compacts each window of W
  /// consecutive block ids (rounded up to a multiple of 64) on its own, so no object leaves its
  /// window, at the price of up to one partly filled block per window instead of per class.
  std::uint64_t locality_window = 0;
  /// true: T and its concrete subclasses; false: T alone (T must be concrete). The policies compact
  /// each concrete class on its own with its own settings, so they set false.
  bool subclasses = true;
  /// Ordered compaction on a growable heap with too few free blocks to gather the class into:
  /// true maps the fresh blocks it lacks (trim() gives them back later); false throws
  /// out_of_memory, changing nothing. The policies set false and compact in place instead, so
  /// that reordering never raises resident memory.
  bool map_fresh_blocks = true;
  /// Ordered compaction only: moves the objects in blocks at or above this block id and leaves
  /// those below where they are (they gather, in key order, into the lowest free blocks as usual).
  /// trim() passes a cut with enough free blocks below it, so the memory above can go.
  std::uint64_t first_block = 0;
};

inline const char* to_string(CompactionStrategy compaction) {
  return compaction == CompactionStrategy::plan ? "plan" : "passes";
}

/// @brief Milliseconds spent in each phase, summed over all passes (and subclasses): GPU time by
/// CUDA events for the plan strategy on cuda, wall time otherwise. For the plan strategy "scan" is
/// building the plan and "forward" is 0 (forwarding pointers are left by the copy kernel). "order"
/// is what only an ordered compaction does: computing the keys and sorting them.
struct DefragPhaseTimes {
  double scan_ms = 0, copy_ms = 0, forward_ms = 0, rewrite_ms = 0, state_ms = 0, order_ms = 0;
  double total_ms() const { return scan_ms + copy_ms + forward_ms + rewrite_ms + state_ms + order_ms; }
};

/// @brief What one defragmentation run did.
struct DefragResult {
  std::string class_name;                  ///< the class that was asked for (a base covers its subclasses)
  bool ordered = false;                    ///< an ordered compaction (objects sorted by a key)
  int passes = 0;                          ///< passes that moved objects (summed over concrete subclasses)
  std::uint64_t blocks_freed = 0;          ///< blocks returned to the free state (ordered: net of the fresh ones taken)
  std::uint64_t objects_moved = 0;         ///< relocated objects
  std::uint64_t bytes_moved = 0;           ///< bytes of field data copied
  std::uint64_t candidates_before = 0;     ///< defrag-candidate blocks before / after the run
  std::uint64_t candidates_after = 0;
  double fragmentation_before = 0;         ///< paper's F over the covered classes, before / after
  double fragmentation_after = 0;
  std::uint64_t blocks_before = 0;         ///< allocated blocks of the covered classes before / after
  std::uint64_t blocks_after = 0;
  std::uint64_t live_objects = 0;          ///< objects of the covered classes (unchanged by the run)
  std::uint64_t minimum_blocks = 0;        ///< sum over covered classes of ceil(live/N): the least possible
  DefragPhaseTimes times;
};

}  // namespace soaheap
