#pragma once
/// @file heap_buffers.cuh
/// @brief Host-side buffers a Heap keeps for its operations and for the library's layers: block
///        lists, the block-id storage of one bitmap, and host snapshots of the heap's metadata.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/bitmap.cuh>
#include <soaheap/core/detail/runtime_state.cuh>
#include <soaheap/core/heap_layout.cuh>
#include <soaheap/core/memory.cuh>

#include <cstdint>
#include <vector>

namespace soaheap::detail {

/// Block ids in memory of a heap's backend (owned by the heap: valid until the next enumeration of
/// the same bitmap).
struct BlockList {
  std::uint32_t* id_array = nullptr;
  std::uint64_t count = 0;
  Backend backend = Backend::host;
  const std::uint32_t* ids() const { return id_array; }
  std::uint32_t* ids() { return id_array; }
  /// Id number @p index, read to the host.
  std::uint32_t id_at(std::uint64_t index) const {
    std::uint32_t id = 0;
    if (backend == Backend::host) return id_array[index];
#if SOAHEAP_HAS_CUDA
    SOAHEAP_CUDA_CHECK(cudaMemcpy(&id, id_array + index, sizeof(id), cudaMemcpyDeviceToHost));
#endif
    return id;
  }
};

/// Block-id storage of one bitmap, made on its first enumeration and reused ever after.
/// counters: [0] and [1] alternate as the count of parallel_do enumerations (each zeroes the one
/// the next will use, so no separate reset is needed), [2] receives stream compaction counts.
struct ListBuffer {
  std::uint64_t blocks = 0;  ///< the block_count_ it was made for
  Memory ids;
  Memory snapshots;  ///< parallel_do's iteration snapshots, one per listed block (made on first use)
  Memory counters;
  LaunchHintWord launch_hint;  ///< threads of the last parallel_do over this list
  int parity = 0;
};

/// A host copy of a heap's metadata (and, if requested, data) with @p Internals over it.
template <class Internals>
struct HeapSnapshot {
  std::vector<BlockHeader> headers;
  std::vector<std::uint64_t> bitmap_words;
  BitmapShape shape;               ///< of the copied bitmaps: block_count() blocks
  Memory data;            // host memory, 128-byte aligned
  HeapRuntimeState state{};
  Internals view;  ///< the heap's internals over the copies
};

}  // namespace soaheap::detail
