#pragma once
/// @file detail/launch_kernels.cuh
/// @brief The grid kernels the executor launches a body with (detail/executor.cuh): one thread per
///        item, counted (the count in device memory), register-capped, summed, in rows of items,
///        pipelined rows, and two steps in one cooperative grid.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/detail/tuning.cuh>

#include <cstdint>
#include <type_traits>

#if SOAHEAP_HAS_CUDA
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#endif

namespace soaheap::detail {

#if SOAHEAP_HAS_CUDA
/// Waits until the kernel before this one in the stream has finished and its writes are visible
/// (needed only when this kernel was launched with programmatic stream serialization).
__device__ inline void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

template <class Body>
__global__ void for_each_thread_kernel(Body body, std::uint64_t count) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; tid < count;
       tid += stride) {
    body(tid);
  }
}

/// Start of a counted launch: waits for the kernel before it (programmatic stream serialization),
/// reads its item count *count · scale, and has thread 0 leave it in @p last_total (host memory
/// mapped into the device, or nullptr) for the host to size the next launch over the same list.
__device__ inline std::uint64_t counted_total(const std::uint64_t* count, std::uint64_t scale, std::uint64_t* last_total) {
  wait_for_previous_kernel();
  const std::uint64_t total = *count * scale;
  if (last_total != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *static_cast<volatile std::uint64_t*>(last_total) = total;
  return total;
}

/// The thread count lives in device memory (written by an earlier kernel of the same stream), so
/// the host launches without waiting for it and the grid strides over whatever it finds. When
/// @p last_total is given (host memory mapped into the device), thread 0 leaves the count there so
/// that the host can size the next launch over the same list.
template <class Body>
__device__ void counted_threads(const Body& body, const std::uint64_t* count, std::uint64_t scale, std::uint64_t* last_total) {
  const std::uint64_t total = counted_total(count, scale, last_total);
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; tid < total;
       tid += stride) {
    body(tid);
  }
}

template <class Body>
__global__ void for_each_counted_thread_kernel(Body body, const std::uint64_t* count, std::uint64_t scale,
                                               std::uint64_t* last_total) {
  counted_threads(body, count, scale, last_total);
}

/// for_each_counted_thread_kernel compiled for at least @p kMinBlocks resident thread blocks per
/// multiprocessor (registers capped to fit): for bodies that ask for it (min_blocks_per_multiprocessor).
template <int kMinBlocks, class Body>
__global__ void __launch_bounds__(kThreadsPerCudaBlock, kMinBlocks)
    for_each_bounded_thread_kernel(Body body, const std::uint64_t* count, std::uint64_t scale, std::uint64_t* last_total) {
  counted_threads(body, count, scale, last_total);
}

/// for_each_counted_thread_kernel for a body that reads its own thread count on the device,
/// body.total() (e.g. several lists' lengths summed: Executor::launch_summed). The unnamed
/// parameters keep the signature of the counted kernels for launch_after_previous.
template <class Body>
__global__ void for_each_summed_thread_kernel(Body body, const std::uint64_t*, std::uint64_t, std::uint64_t* last_total) {
  wait_for_previous_kernel();
  const std::uint64_t total = body.total();
  if (last_total != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *static_cast<volatile std::uint64_t*>(last_total) = total;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; tid < total;
       tid += stride) {
    body(tid);
  }
}

/// for_each_counted_thread_kernel for bodies with prefetch(tid) and run(tid, item): a thread block
/// serves kRows consecutive rows of blockDim items, and each thread first issues the list loads of
/// its kRows items and then runs them. Its field loads then wait for one memory round trip per item
/// instead of two (list, then fields), which is what keeps a streaming parallel_do at the speed of
/// a loop over plain arrays (docs/decisions/012-snapshot-in-the-list-and-rows.md).
///
/// Its pipelined sibling (for_each_pipelined_row_kernel) serves the lists of the methods for which
/// it measured faster (RowKernelChoice).
template <int kRows, class Body>
__global__ void for_each_counted_row_kernel(Body body, const std::uint64_t* count, std::uint64_t scale,
                                            std::uint64_t* last_total) {
  const std::uint64_t total = counted_total(count, scale, last_total);
  const std::uint64_t chunk_items = static_cast<std::uint64_t>(kRows) * blockDim.x;
  for (std::uint64_t first = blockIdx.x * chunk_items + threadIdx.x; first < total;
       first += static_cast<std::uint64_t>(gridDim.x) * chunk_items) {
    typename Body::Item items[kRows];
SOAHEAP_UNROLL
    for (int row = 0; row < kRows; ++row) {
      const std::uint64_t tid = first + static_cast<std::uint64_t>(row) * blockDim.x;
      if (tid < total) items[row] = body.prefetch(tid);
    }
    // The method is inlined once, not kRows times (a rolled loop: each row takes items[0] and
    // shifts the rest down with constant indices, so the items stay in registers).
SOAHEAP_NO_UNROLL
    for (int row = 0; row < kRows; ++row) {
      const std::uint64_t tid = first + static_cast<std::uint64_t>(row) * blockDim.x;
      const typename Body::Item item = items[0];
SOAHEAP_UNROLL
      for (int next = 0; next + 1 < kRows; ++next) items[next] = items[next + 1];
      if (tid < total) body.run(tid, item);
    }
  }
}

/// The loop of for_each_pipelined_row_kernel with indices of type @p Index (the item count @p count
/// and every index the loop forms must fit): thread block b serves rows b, b + G, b + 2G, ... of
/// blockDim.x items each (G = gridDim.x). While a row runs, the thread loads the list entry of the
/// row after next and asks L2 for the fields of its next row (Body::warm), whose entry arrived
/// during the previous row: the next row's field loads then hit L2 instead of waiting for memory.
template <class Index, class Body>
__device__ void pipelined_rows(const Body& body, std::uint64_t count) {
  const Index total = static_cast<Index>(count);
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  Index tid = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
  if (tid >= total) return;
  typename Body::Item item = body.prefetch(static_cast<std::uint64_t>(tid));
  typename Body::Item following = item;
  if (tid + stride < total) following = body.prefetch(static_cast<std::uint64_t>(tid + stride));
  for (;;) {
    const Index next = tid + stride;
    const Index after = next + stride;
    typename Body::Item later = following;
    if (after < total) later = body.prefetch(static_cast<std::uint64_t>(after));
    if (next < total) body.warm(static_cast<std::uint64_t>(next), following);
    body.run(static_cast<std::uint64_t>(tid), item);
    if (next >= total) return;
    tid = next;
    item = following;
    following = later;
  }
}

/// for_each_counted_row_kernel with the rows pipelined: each thread loads the list entries of the
/// rows ahead of the current one and has L2 fetch its next row's fields (pipelined_rows), so it
/// waits for the list once per launch and a row's field loads wait for L2, not for memory (axpy
/// over 16.7 M objects on an H100: 1.126 → 1.072–1.076× the plain arrays;
/// docs/decisions/013-row-kernel-measured-per-method.md). Warming reads every field of the next object, also those its method does not
/// read: the measured choice (RowKernelChoice) keeps the row kernel for methods where that costs
/// more than it saves. The grid is the kernel's resident thread blocks
/// (Executor::launch_counted) and its rows are dealt to them in turn, so every thread block
/// serves the same number of rows, give or take one, and the grid ends together: with runs of
/// 16 consecutive rows per thread block, a grid of 4,096 thread blocks over 16.7 M objects
/// filled the GPU 3.9 times and the last, partial round left SMs idle (axpy over 13.4–20.1 M
/// objects on an H100: 1.12–1.20× the plain arrays, by the fraction of the last round;
/// docs/decisions/013-row-kernel-measured-per-method.md). Which of this kernel and the row kernel serves a method
/// is measured (RowKernelChoice): latency-bound methods want the row kernel's many more threads
/// (game-of-life 5 % slower with every long list pipelined).
template <class Body>
__global__ void for_each_pipelined_row_kernel(Body body, const std::uint64_t* count, std::uint64_t scale,
                                              std::uint64_t* last_total) {
  const std::uint64_t total = counted_total(count, scale, last_total);
  // 32-bit indices where no index the loop forms can reach 2^32: a 64-bit index costs two
  // instructions per compare and add (axpy over 16.7 M objects on an H100: 1.132 -> 1.126 times the
  // plain arrays, docs/decisions/013-row-kernel-measured-per-method.md).
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  if (total + 2 * stride < (std::uint64_t{1} << 32)) {
    pipelined_rows<std::uint32_t>(body, total);
  } else {
    pipelined_rows<std::uint64_t>(body, total);
  }
}

/// Two steps in one cooperative grid (all its thread blocks resident at once): first(tid) for tid in
/// [0, first_count), a grid-wide barrier, then body(tid) for tid in [0, *count · scale) where
/// @p count was written by the first step. One launch instead of two for steps whose second is
/// tiny (Executor::launch_pair). Both loops stride over the grid by whole warps (the grid's
/// threads and @p first_count are multiples of 32), so the first step sees converged warps as in
/// its own launch.
template <class First, class Body>
__global__ void pair_kernel(First first, std::uint64_t first_count, Body body, const std::uint64_t* count,
                            std::uint64_t scale, std::uint64_t* last_total) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  const std::uint64_t start = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (std::uint64_t tid = start; tid < first_count; tid += stride) first(tid);
  cooperative_groups::this_grid().sync();  // also orders the first step's writes before the reads below
  const std::uint64_t total = *count * scale;
  if (last_total != nullptr && start == 0) *static_cast<volatile std::uint64_t*>(last_total) = total;
  for (std::uint64_t tid = start; tid < total; tid += stride) body(tid);
}
#endif

/// Body::kMinBlocksPerMultiprocessor where the body declares it (a parallel_do method kernel:
/// its class's setting), else 0: thread blocks the body's one-thread-per-item kernel is compiled
/// to keep resident per multiprocessor.
template <class Body, class = void>
inline constexpr int min_blocks_per_multiprocessor = 0;
template <class Body>
inline constexpr int min_blocks_per_multiprocessor<Body, std::void_t<decltype(Body::kMinBlocksPerMultiprocessor)>> =
    Body::kMinBlocksPerMultiprocessor;

#if SOAHEAP_HAS_CUDA
/// The one-thread-per-item kernel for @p Body: register-capped where the body asks for it.
template <class Body>
constexpr auto counted_thread_kernel() {
  constexpr int kMinBlocks = min_blocks_per_multiprocessor<Body>;
  static_assert(kMinBlocks >= 0 && kMinBlocks <= static_cast<int>(kFullBlocksPerMultiprocessor),
                "soaheap: kMinBlocksPerMultiprocessor must be 0 (the compiler's choice) to 8 (thread blocks of 256 threads per multiprocessor)");
  if constexpr (kMinBlocks > 0) {
    return &for_each_bounded_thread_kernel<kMinBlocks, Body>;
  } else {
    return &for_each_counted_thread_kernel<Body>;
  }
}
#endif

}  // namespace soaheap::detail
