#pragma once
/// @file detail/untyped_reports.cuh
/// @brief What the host learns about untyped memory: heap.stats()'s untyped part and the
///        exceptions for the errors that malloc and free record in kernels.

#include <soaheap/core/detail/block_counting.cuh>
#include <soaheap/core/detail/executor.cuh>
#include <soaheap/core/detail/untyped_allocator.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/memory.cuh>
#include <soaheap/core/untyped_stats.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace soaheap::detail {

/// Per size class blocks (of its spans), used chunks and active spans; then run heads and run
/// blocks. Launched with block_counting_threads(view.block_count) threads.
template <class View>
struct UntypedStatisticsKernel {
  using Layout = typename View::Untyped;
  static constexpr int kCounters = 3 * Layout::kClassCount + 2;
  View view;
  std::uint64_t* counters;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const BitmapView runs = Untyped<View>::run_blocks(view);
    count_blocks<kCounters>(tid, view.block_count, counters, [&](std::uint64_t block, std::uint64_t* local) {
      if (runs.get(block)) {
        local[3 * Layout::kClassCount + 1] += 1;
        if (atomic_load(&view.headers[block].class_id) == kUntypedRunHeadId) local[3 * Layout::kClassCount] += 1;
        return;
      }
      const int k = Layout::size_class_of_id(atomic_load(&view.headers[block].class_id));
      if (k < 0 || !Untyped<View>::allocated(view, k).get(block)) return;
      local[3 * k] += static_cast<std::uint64_t>(Layout::span(k));  // the later blocks of a span are counted here
      local[3 * k + 1] += popcount(atomic_load(&view.headers[block].allocation) & Layout::full_mask(k));
      local[3 * k + 2] += Untyped<View>::active(view, k).get(block) ? 1 : 0;
    });
  }
};

/// One thread per size class: gives back what its current region never handed out.
template <class View>
struct GiveBackRegionsKernel {
  View view;
  SOAHEAP_HD void operator()(std::uint64_t size_class) const {
    Untyped<View>::give_back_regions(view, static_cast<int>(size_class));
  }
};

/// Gives back every size class's unhanded region slots (Heap::release_free_memory does it first,
/// so that blocks whose handed chunks were all freed retire). Between kernels; waits for it.
template <class View>
void give_back_untyped_regions(const Executor& executor, const View& view) {
  executor.run(static_cast<std::uint64_t>(View::Untyped::kClassCount), GiveBackRegionsKernel<View>{view});
}

/// True for the error kinds that soaheap::malloc / soaheap::free record.
inline bool is_untyped_error(HeapErrorKind kind) {
  return kind == HeapErrorKind::untyped_out_of_memory || kind == HeapErrorKind::free_of_unallocated_memory ||
         kind == HeapErrorKind::free_of_foreign_pointer || kind == HeapErrorKind::invalid_alignment;
}

/// Throws the exception for an untyped error that a kernel recorded (@p payload: the requested size,
/// the freed address or the alignment).
[[noreturn]] inline void throw_untyped_error(HeapErrorKind kind, std::uint64_t payload, std::uint64_t block_count,
                                             std::uint64_t heap_bytes, std::uint64_t block_bytes,
                                             const std::string& advice) {
  std::ostringstream message;
  message << "soaheap: ";
  switch (kind) {
    case HeapErrorKind::untyped_out_of_memory:
      message << "out of memory in soaheap::malloc of " << payload << " bytes"
              << (payload > block_bytes ? " (" + std::to_string((payload + block_bytes - 1) / block_bytes) +
                                              " contiguous blocks)"
                                        : std::string())
              << ": the " << heap_bytes << "-byte heap of " << block_count << " blocks of " << block_bytes
              << " bytes has no room for it; malloc returned nullptr. " << advice;
      throw out_of_memory(message.str());
    case HeapErrorKind::free_of_unallocated_memory:
      message << "soaheap::free of 0x" << std::hex << payload << std::dec
              << ", which is not allocated (freed twice, or inside a larger allocation)";
      throw usage_error(message.str());
    case HeapErrorKind::free_of_foreign_pointer:
      message << "soaheap::free of 0x" << std::hex << payload << std::dec
              << ", which soaheap::malloc of this heap did not return";
      throw usage_error(message.str());
    default:
      message << "soaheap::malloc_aligned with alignment " << payload << ": it must be a power of two up to "
              << kMaxUntypedAlignment;
      throw invalid_argument(message.str());
  }
}

/// heap.stats()'s untyped part: what UntypedStatisticsKernel counted (@p values, on the host),
/// plus the cumulative counters.
template <class View>
UntypedStats untyped_stats_from(const View& view, const std::uint64_t* values, const Memory& runtime_state) {
  using Layout = typename View::Untyped;
  UntypedCounters totals{};
  runtime_state.copy_to_host(&totals, offsetof(HeapRuntimeState, untyped), sizeof(totals));
  // Chunks that a current region holds but never handed out are reserved, not used.
  std::vector<std::uint64_t> regions(kMaxUntypedClasses * kRegionShards);
  runtime_state.copy_to_host(regions.data(), offsetof(HeapRuntimeState, untyped_regions), regions.size() * sizeof(std::uint64_t));
  UntypedStats stats;
  stats.block_bytes = Layout::kBlockBytes;
  for (int k = 0; k < Layout::kClassCount; ++k) {
    UntypedSizeClassStats entry;
    entry.chunk_bytes = Layout::chunk_bytes(k);
    entry.capacity = Layout::capacity(k);
    entry.span = Layout::span(k);
    entry.blocks = values[3 * k];
    entry.region_chunks = 0;
    for (std::uint64_t shard = 0; shard < kRegionShards; ++shard)
      entry.region_chunks += unhanded_region_slots(view.untyped_class(k), regions[k * kRegionShards + shard]);
    entry.used_chunks = values[3 * k + 1] - entry.region_chunks;
    entry.active_blocks = values[3 * k + 2];
    stats.size_classes.push_back(entry);
  }
  stats.runs = values[3 * Layout::kClassCount];
  stats.run_blocks = values[3 * Layout::kClassCount + 1];
  stats.allocations_total = totals.allocations;
  stats.bytes_requested_total = totals.bytes_requested;
  stats.frees_total = totals.frees;
  stats.failures_total = totals.failures;
  return stats;
}

}  // namespace soaheap::detail
