#pragma once
/// @file detail/tuning.cuh
/// @brief Every tuning constant of the launches, in one place: a value, one line of why, and the
///        decision record (docs/decisions/) that measured it. Changing one changes performance,
///        never results. The allocator's own constants live with the allocator
///        (detail/slot_reservation.cuh).

#include <cstdint>

namespace soaheap::detail {

// ---- grids ------------------------------------------------------------------------------------

/// Threads per CUDA thread block: 8 warps, a full SM in 8 blocks; the launch sizes below count in it.
inline constexpr unsigned kThreadsPerCudaBlock = 256;
/// Blocks of kThreadsPerCudaBlock one multiprocessor holds at full occupancy (2048 resident threads
/// on sm_70..sm_90); the upper bound of kMinBlocksPerMultiprocessor (decision 007).
inline constexpr unsigned kFullBlocksPerMultiprocessor = 2048 / kThreadsPerCudaBlock;
/// Largest grid of a plain launch; longer ranges grid-stride (beyond ~268 M threads), which keeps
/// the grid within every GPU's limit.
inline constexpr std::uint64_t kMaxGridBlocks = std::uint64_t{1} << 20;
/// A launch sized from its list's last length expects 1/kLaunchHintHeadroom more plus a block, so
/// a list that grew a little is still one thread per item (decision 011).
inline constexpr std::uint64_t kLaunchHintHeadroom = 8;

// ---- parallel_do ------------------------------------------------------------------------------

/// Items per thread over a large list: the list loads of 4 items in flight before their methods run
/// keep a streaming method at the speed of plain arrays (decision 012).
inline constexpr int kParallelDoRows = 4;
/// Rows per thread of the pipelined row kernel; it serves a list only when that fills the GPU
/// 2·16 times over (8.6 M items on an H100) and where measured faster (decision 013).
inline constexpr int kPipelinedRows = 16;
/// Launches of each row kernel a method's measurement times before it keeps one (decision 013).
inline constexpr int kRowKernelSamples = 3;
/// The pipelined kernel must be this share faster per item to be kept: a tie keeps the row
/// kernel, which needs no warming (decision 013).
inline constexpr double kRowKernelMargin = 0.03;
/// Lists up to this many items are tiny for their enumeration (SparseEnumerateKernel): an empty
/// list is expected to hold 256, one of 680 items 1,021 (decision 014).
inline constexpr std::uint64_t kSparseEnumerationItems = 1024;
/// Items the method step of a one-grid parallel_do (Executor::launch_pair) may expect at most: a
/// larger heavy method ran 42 % slower in one cooperative grid (collision, decision 014).
inline constexpr std::uint64_t kPairLaunchMaxItems = 64 * kThreadsPerCudaBlock;
/// Objects up to which a parallel_do over several concrete classes is one method launch; above,
/// a launch per class costs little against the methods (decision 015).
inline constexpr std::uint64_t kHierarchyLaunchMaxItems = std::uint64_t{1} << 20;

// ---- enumeration and statistics ---------------------------------------------------------------

/// Heap blocks each lane of the block-list enumeration reads: the measured best of 1, 4, 8 and 16
/// (decision 012).
inline constexpr int kEnumerationBlocksPerLane = 4;
/// The statistics' counting (detail/block_counting.cuh): a warp's lanes count a chunk of this
/// many consecutive blocks, eight each, and add their per-class counters up once per warp.
inline constexpr std::uint64_t kCountingBlocksPerWarp = 256;
inline constexpr std::uint64_t kCountingLanes = 32;

/// Operations the host may be ahead of the GPU on a growable heap (detail/operations_ahead.cuh):
/// a few hundred launches, far from a full launch queue, and enough to keep the GPU fed.
inline constexpr int kGrowableOperationsAhead = 32;

}  // namespace soaheap::detail
