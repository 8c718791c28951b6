#pragma once
/// @file heap_options.hpp
/// @brief What a user chooses when creating a heap: its size, backend, memory kind and options.

#include <soaheap/core/backend.cuh>

#include <cstdint>

namespace soaheap {

/// @brief Where a cuda heap keeps its objects.
enum class HeapMemory {
  device,   ///< GPU memory (the default): host code sees objects only through copies (for_each, stats)
  managed,  ///< CUDA managed (unified) memory: between kernels, after heap.synchronize(), host code
            ///< may read and write objects through their pointers; never larger than the GPU's free memory
};

/// @brief How big a heap is and where it runs. Give at most one of `bytes` and `objects`; give
/// neither and the heap sizes itself: it starts at kGrowingStartBytes and grows to max_bytes
/// (default then kAllMemory).
struct HeapOptions {
  std::uint64_t bytes = 0;       ///< total memory for data, block headers and bitmaps
  std::uint64_t objects = 0;     ///< or: room for this many objects of the smallest class
  /// The start of a heap given no size (bytes and objects both 0).
  static constexpr std::uint64_t kGrowingStartBytes = std::uint64_t{64} << 20;
  /// The most memory the heap may grow to. 0 (the default) with a size given: the heap stays at
  /// that size; 0 with no size given: kAllMemory.
  /// Above that size, the heap reserves addresses for max_bytes once and maps memory as kernels
  /// need it, without moving anything; `release_free_memory()` / `soaheap::trim` give memory
  /// back. kAllMemory: the GPU's (host: the machine's) total memory. Not for managed heaps.
  /// While a kernel that may grow the heap runs, host threads may copy, free, wait and launch as
  /// they like: growth only maps memory (heap_growth.cuh). The heap's own operations keep the
  /// host at most 32 ahead of the GPU; a loop that only launches kernels of its own with view()
  /// should wait now and then, or it fills the launch queue.
  std::uint64_t max_bytes = 0;
  static constexpr std::uint64_t kAllMemory = ~std::uint64_t{0};
  /// A growable heap: one kernel may grow it to this many times the blocks mapped at its launch
  /// (2..64), or three quarters of that where stopping at a power of 64 blocks saves a bitmap level
  /// (a dependent read in every search). The headers and bitmap words of those blocks exist ahead,
  /// about 16 + (bitmaps/8) bytes per block (some 2 % of a 1 KiB block for each unit).
  unsigned growth_headroom = 2;
  Backend backend = Backend::host;
  /// cuda only (host-backend heaps are host memory anyway): device or managed memory.
  HeapMemory memory = HeapMemory::device;
  /// Host backend worker threads; 0 = the environment variable SOAHEAP_HOST_THREADS when set
  /// (for programs that cannot pass options, e.g. DynaSOAr's through the shim), else all cores.
  unsigned host_threads = 0;
  /// Time the enumeration step of every parallel_do (see Heap::enumeration_seconds()): on cuda the
  /// enumeration kernel's warps stamp the GPU clock (a parallel_do over one class whose list was tiny
  /// runs enumeration and method in one launch, Executor::launch_pair: its enumeration part counts),
  /// on the host backend the host's clock measures the step.
  bool time_enumeration = false;
  /// cuda only: pack objects that lanes of diverged warps allocate (`new` in a branch or a loop of
  /// differing length) into fewer blocks. By default such a lane starts a new block as soon as the
  /// blocks it found had filled up under it; with many lanes allocating at once that leaves blocks
  /// about half full. Packed, it looks again a few times first: fewer peak blocks without
  /// defragmentation, slower with the `auto` policy (docs/decisions/004-pack-allocations-opt-in.md).
  /// For programs that do not defragment.
  bool pack_allocations = false;
};

/// @brief How thorough `validate()` is.
enum class Validation {
  structure,  ///< bitmaps, block headers and their agreement
  full,       ///< also every reflected pointer field: null or a live object of a fitting class
};

}  // namespace soaheap
