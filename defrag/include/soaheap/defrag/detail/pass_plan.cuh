#pragma once
/// @file detail/pass_plan.cuh
/// @brief The plan of one defragmentation pass: which candidates are sources and targets, and the
///        allocation bitmaps of those blocks as they were before any object moved.
///
/// R (the sorted candidate list) has r entries; with factor n the first B = floor(r/(n+1)) are the
/// sources, and source i owns the n targets R[i + k·B], k = 1..n (the paper's Figure 5). Because R is
/// sorted, a candidate block is a source exactly when its id is below R[B].
///
/// The bitmaps are frozen in the plan because the copy kernel sets target allocation bits while other
/// threads of the same source still need the original free slots to find their destination; the
/// records rewrite strategy (paper §3.8) recomputes destinations from the same frozen bitmaps.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Threads the copy and forwarding kernels assign to each source block (one per possible slot).
inline constexpr std::uint64_t kThreadsPerSourceBlock = 64;

/// @brief Position of the @p rank-th (0-based) set bit of @p value, which must have more than
/// @p rank set bits. Six halving steps for every rank: no divergence between the 64 threads of a
/// source block, unlike clearing the lowest bit rank times.
SOAHEAP_HD inline int select_set_bit(std::uint64_t value, int rank) {
  int position = 0;
  for (int width = 32; width >= 1; width /= 2) {
    const int below = popcount(value & low_bits(width));
    if (rank >= below) {
      rank -= below;
      value >>= width;
      position += width;
    }
  }
  return position;
}

/// Where the rank-th object of a source goes (block == kNoDestination: nowhere, cannot happen for a
/// valid plan because n targets of fill <= n·N/(n+1) have room for a source of that fill).
struct Destination {
  static constexpr std::uint32_t kNoDestination = 0xffffffffu;
  std::uint32_t block;
  int slot;
};

/// One object a pass moves: from @p source_slot of source @p source (index i into R) to @p destination.
struct Move {
  std::uint64_t source;
  int source_slot;
  Destination destination;
};

/// Trivially copyable description of one pass, passed to every kernel of the pass.
struct PassPlan {
  const std::uint32_t* candidates = nullptr;  ///< R, sorted block ids of all candidates
  std::uint64_t source_count = 0;             ///< B
  int factor = 1;                             ///< n
  int class_index = 0;                        ///< class whose blocks are merged
  std::uint32_t first_target = 0;             ///< R[B]: candidates below it are sources
  std::uint64_t* source_bitmaps = nullptr;    ///< [B]: allocation bitmap of source i before the pass
  std::uint64_t* target_free = nullptr;       ///< [n·B]: free-slot mask of target k of source i at k·B + i

  SOAHEAP_HD std::uint32_t source_block(std::uint64_t source) const { return candidates[source]; }
  SOAHEAP_HD std::uint32_t target_block(std::uint64_t source, int k) const {
    return candidates[source + static_cast<std::uint64_t>(k + 1) * source_count];
  }
  SOAHEAP_HD std::uint64_t& target_free_slots(std::uint64_t source, int k) const {
    return target_free[static_cast<std::uint64_t>(k) * source_count + source];
  }

  /// @brief The slot that receives the @p rank-th object (0-based, in slot order) of source
  /// @p source: the rank-th free slot across its targets, in target order.
  SOAHEAP_HD Destination destination_of(std::uint64_t source, int rank) const {
    int remaining = rank;
    for (int k = 0; k < factor; ++k) {
      const std::uint64_t free_slots = target_free_slots(source, k);
      const int available = popcount(free_slots);
      if (remaining < available) return {target_block(source, k), select_set_bit(free_slots, remaining)};
      remaining -= available;
    }
    return {Destination::kNoDestination, 0};
  }

  /// @brief The object thread @p tid of the copy and forwarding kernels handles: kThreadsPerSourceBlock
  /// consecutive threads per source block, thread s takes the s-th object of its source and sends it
  /// to the s-th free slot across the source's targets. False when the thread has no object (or,
  /// impossible for a valid plan, the object has no destination).
  SOAHEAP_HD bool move_of_thread(std::uint64_t tid, Move& move) const {
    const std::uint64_t source = tid / kThreadsPerSourceBlock;
    const int rank = static_cast<int>(tid % kThreadsPerSourceBlock);
    const std::uint64_t objects = source_bitmaps[source];
    if (rank >= popcount(objects)) return false;
    move.destination = destination_of(source, rank);
    if (move.destination.block == Destination::kNoDestination) return false;
    move.source = source;
    move.source_slot = select_set_bit(objects, rank);
    return true;
  }

  /// @brief Index i of source block @p block in R[0..B) (binary search), or -1 if it is no source.
  SOAHEAP_HD std::int64_t source_index_of(std::uint64_t block) const {
    std::uint64_t low = 0;
    std::uint64_t high = source_count;
    while (low < high) {
      const std::uint64_t middle = low + (high - low) / 2;
      if (candidates[middle] < block) {
        low = middle + 1;
      } else {
        high = middle;
      }
    }
    return low < source_count && candidates[low] == block ? static_cast<std::int64_t>(low) : -1;
  }
};

/// @brief A kernel over the objects a pass moves (PassPlan::move_of_thread's thread layout, run on
/// sources · kThreadsPerSourceBlock threads): @p Step::apply(view, plan, move) for each of them.
template <class View, class Step>
struct PassMoveKernel {
  View view;
  PassPlan plan;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    Move move;
    if (plan.move_of_thread(tid, move)) Step::apply(view, plan, move);
  }
};

}  // namespace soaheap::detail
