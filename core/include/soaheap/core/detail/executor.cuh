#pragma once
/// @file detail/executor.cuh
/// @brief `Executor`: where kernels of one heap run (the backend, the host pool, the CUDA stream)
///        and how a body is launched there: the grid sizes, the kernel for a list's length
///        (detail/launch_kernels.cuh, detail/row_kernel_choice.cuh) and the launch attributes.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/thread_pool.hpp>
#include <soaheap/core/detail/kernel_preload.cuh>
#include <soaheap/core/detail/launch_kernels.cuh>
#include <soaheap/core/detail/row_kernel_choice.cuh>
#include <soaheap/core/detail/tuning.cuh>
#include <soaheap/base/portability.cuh>

#include <algorithm>
#include <cstdint>

#if SOAHEAP_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace soaheap::detail {

/// Threads per block for a launch of one thread per item over @p items items on a GPU of
/// @p multiprocessors SMs: kThreadsPerCudaBlock, or, for a list shorter than one such block per
/// SM, the power of two down to 32 that leaves the fewest warps on the busiest SM (the larger on a
/// tie). 20,000 items are 79 blocks of 256 threads on an H100's 132 SMs (eight warps on 79 SMs,
/// none on 53) or 625 blocks of 32 (at most five warps on any): a heavy method over a short list
/// (an all-pairs force loop) is then shared by every SM, and each scheduler has fewer warps to
/// interleave. DynaSOAr's nbody through the shim: its force kernel 8.84 → 8.47 ms, the program
/// 3.66 → 3.50 s. Longer lists keep 256: spreading every list (lists of up to 32 warps per SM
/// went to blocks of 32) made generation 4–9 % and wa-tor 3 % slower
/// (docs/decisions/014-tiny-and-short-lists.md).
constexpr std::uint64_t spread_block_threads(std::uint64_t items, std::uint64_t multiprocessors) {
  if (items == 0 || multiprocessors == 0 || items >= multiprocessors * kThreadsPerCudaBlock) return kThreadsPerCudaBlock;
  const std::uint64_t warps = (items + 31) / 32;
  std::uint64_t best = kThreadsPerCudaBlock, best_load = ~std::uint64_t{0};
  for (std::uint64_t threads = kThreadsPerCudaBlock; threads >= 32; threads /= 2) {
    const std::uint64_t warps_per_block = threads / 32;
    const std::uint64_t blocks = (warps + warps_per_block - 1) / warps_per_block;
    const std::uint64_t busiest = std::min((blocks + multiprocessors - 1) / multiprocessors * warps_per_block, warps);
    if (busiest < best_load) best = threads, best_load = busiest;
  }
  return best;
}

/// Where a counted launch (Executor::launch_counted) leaves its thread count for the next launch
/// over the same list: one word of pinned host memory that the device writes through its mapped
/// address. Empty (no hint) for lists whose launches are rare.
struct LaunchHint {
  static constexpr std::uint64_t kUnknown = ~std::uint64_t{0};  ///< before the first launch
  std::uint64_t* host = nullptr;
  std::uint64_t* device = nullptr;
};

/// Where kernels of one heap run: the backend, the host pool, the CUDA stream.
struct Executor {
  Backend backend = Backend::host;
  ThreadPool* pool = nullptr;
#if SOAHEAP_HAS_CUDA
  cudaStream_t stream = nullptr;
#endif

  /// Runs body(tid) for tid in [0, count) and waits for it to finish.
  template <class Body>
  void run(std::uint64_t count, const Body& body) const {
    launch(count, body);
    synchronize();
  }

  /// Runs body(tid) for tid in [0, count): asynchronously on cuda (stream order), at once on host.
  template <class Body>
  void launch(std::uint64_t count, const Body& body) const {
    if (count == 0) return;
    if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      const std::uint64_t blocks = (count + kThreadsPerCudaBlock - 1) / kThreadsPerCudaBlock;
      const unsigned grid = static_cast<unsigned>(blocks < kMaxGridBlocks ? blocks : kMaxGridBlocks);
      preloaded<for_each_thread_kernel<Body>>()<<<grid, kThreadsPerCudaBlock, 0, stream>>>(body, count);
      SOAHEAP_CUDA_CHECK(cudaGetLastError());
#else
      throw usage_error("the cuda backend is not compiled into this translation unit (compile it with nvcc)");
#endif
    } else {
      pool->run(count, [&body](std::uint64_t tid) { body(tid); });
    }
  }

  /// Runs body(tid) for tid in [0, *count · scale) where @p count is in the backend's memory and
  /// may be written by an earlier launch; @p max_count bounds it. Never waits on cuda.
  /// Without a @p hint the grid is one wave of resident thread blocks (or fewer for small bounds)
  /// that strides over the count. With one, the grid has a thread per item of the previous launch
  /// over the same list plus room to grow: methods whose cost varies from item to item (allocation,
  /// contention, pointer chasing) then get the hardware's dynamic block scheduling, which a fixed
  /// stride loses (wa-tor's Fish::commit_move on an H100: 56 ms strided, 19 ms one thread per
  /// item), while a list that shrank or is empty does not pay for the heap's capacity.
  /// With @p kRows > 1 the body has prefetch/run, and a launch whose list is large (at least 2·kRows
  /// waves of resident threads by the hint) serves kRows items per thread
  /// (for_each_counted_row_kernel) when that kernel keeps full occupancy (a light method: a
  /// streaming loop); a list that fills the GPU 2·kPipelinedRows times over gets the pipelined row
  /// kernel instead where that was measured faster for the method (RowKernelChoice). Methods that
  /// need more registers, and lists that would not fill the GPU kRows times over, keep one thread
  /// per item: the rows of a thread run one after the other, which
  /// costs methods of varying cost their dynamic scheduling and few-object lists their parallelism
  /// (collision's O(n²) methods over 65 k bodies: 7× slower with 4 rows on an H100).
  template <int kRows = 1, class Body>
  void launch_counted(const std::uint64_t* count, std::uint64_t scale, std::uint64_t max_count, const LaunchHint& hint,
                      const Body& body) const {
    if (max_count == 0) return;
    if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      const auto blocks_per_multiprocessor = [](auto kernel) {
        int blocks = 0;
        SOAHEAP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreadsPerCudaBlock, 0));
        return static_cast<std::uint64_t>(blocks < 1 ? 1 : blocks);
      };
      // Computed once per kernel; the program's device is assumed not to change.
      constexpr auto thread_kernel = preloaded<counted_thread_kernel<Body>()>();
      static const std::uint64_t resident_blocks = blocks_per_multiprocessor(thread_kernel) * multiprocessor_count();
      const std::uint64_t expected = expected_items(hint, max_count);
      if constexpr (kRows > 1) {
        constexpr std::uint64_t full = kFullBlocksPerMultiprocessor;
        static const bool light = blocks_per_multiprocessor(preloaded<for_each_counted_row_kernel<kRows, Body>>()) >= full;
        const std::uint64_t waves = resident_blocks * kThreadsPerCudaBlock;
        if (light && hint.host != nullptr && expected >= 2 * kRows * waves) {
          static const bool pipelined_light =
              blocks_per_multiprocessor(preloaded<for_each_pipelined_row_kernel<Body>>()) >= full;
          const std::uint64_t items = std::min(expected, max_count);
          if (pipelined_light && expected >= 2 * kPipelinedRows * waves) {
            static RowKernelChoice choice;
            const RowKernelChoice::Launch how = choice.begin(stream, items);
            if (how.pipelined) {
              static const std::uint64_t pipelined_resident =
                  blocks_per_multiprocessor(for_each_pipelined_row_kernel<Body>) * multiprocessor_count();
              const std::uint64_t rows = (items + kThreadsPerCudaBlock - 1) / kThreadsPerCudaBlock;
              launch_after_previous(for_each_pipelined_row_kernel<Body>,
                                    std::min(rows, pipelined_resident), body, count, scale, hint.device);
            } else {
              launch_rows<kRows>(items, body, count, scale, hint);
            }
            choice.end(how, stream);
            return;
          }
          launch_rows<kRows>(items, body, count, scale, hint);
          return;
        }
      }
      // One wave that strides without a hint; with one, a thread per expected item, in blocks
      // that spread a short list over every multiprocessor.
      const std::uint64_t threads = hint.host == nullptr ? kThreadsPerCudaBlock : block_threads_for(hint);
      const std::uint64_t bound = (max_count + threads - 1) / threads;
      const std::uint64_t blocks = hint.host == nullptr ? resident_blocks : (expected + threads - 1) / threads;
      const unsigned grid = static_cast<unsigned>(blocks < bound ? blocks : bound);
      launch_after_previous(thread_kernel, grid, body, count, scale, hint.device, threads);
#else
      throw usage_error("the cuda backend is not compiled into this translation unit (compile it with nvcc)");
#endif
    } else {
      (void)hint;  // the host pool sizes nothing
      const std::uint64_t total = atomic_load(count) * scale;
      if (total != 0) pool->run(total, [&body](std::uint64_t tid) { body(tid); });
    }
  }

  /// Runs body(tid) for tid in [0, body.total()), the total read on the device (counts written by
  /// earlier launches of the stream); @p max_count bounds it. Never waits on cuda. The grid is as
  /// in launch_counted without rows: a thread per item of the previous launch with this @p hint,
  /// one strided wave without one.
  template <class Body>
  void launch_summed(std::uint64_t max_count, const LaunchHint& hint, const Body& body) const {
    if (max_count == 0) return;
    if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      static const std::uint64_t resident_blocks = [] {
        int blocks = 0;
        SOAHEAP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, preloaded<for_each_summed_thread_kernel<Body>>(),
                                                                         kThreadsPerCudaBlock, 0));
        return static_cast<std::uint64_t>(blocks < 1 ? 1 : blocks) * multiprocessor_count();
      }();
      const std::uint64_t expected = expected_items(hint, max_count);  // max_count when unknown
      const std::uint64_t threads = expected == max_count ? kThreadsPerCudaBlock : block_threads_for(hint);
      const std::uint64_t bound = (max_count + threads - 1) / threads;
      const std::uint64_t blocks = expected == max_count ? resident_blocks : (expected + threads - 1) / threads;
      const std::uint64_t grid = std::max<std::uint64_t>(1, blocks < bound ? blocks : bound);
      launch_after_previous(for_each_summed_thread_kernel<Body>, grid, body, nullptr, 0, hint.device, threads);
#else
      throw usage_error("the cuda backend is not compiled into this translation unit (compile it with nvcc)");
#endif
    } else {
      (void)hint;
      const std::uint64_t total = body.total();
      if (total != 0) pool->run(total, [&body](std::uint64_t tid) { body(tid); });
    }
  }

  /// Items the second step of launch_pair may expect at most (kPairLaunchMaxItems in tuning.cuh).
  static constexpr std::uint64_t kPairMaxItems = kPairLaunchMaxItems;

  /// Runs first(tid) for tid in [0, first_count) and then body(tid) for tid in [0, *count · scale),
  /// where @p count is written by the first step, as ONE cooperative grid with a grid-wide barrier
  /// between the steps, when the second step is known to be tiny: the @p hint (the previous
  /// launch over the same list) expects at most kPairMaxItems items, and no more than the grid's
  /// resident threads. A kernel boundary costs a launch and a drain of the GPU, about as much as
  /// the whole operation when the list is empty or tiny (an empty parallel_do: two launches,
  /// 7–9 µs on an H100, against 4–4.7 µs for one empty kernel). Returns false, having launched
  /// nothing, where it does not apply (host backend, no hint yet, a larger list, a GPU without
  /// cooperative launch): the caller then launches the steps one after the other. A list that
  /// grew since its hint is still served whole (the grid strides). @p first_count must be a
  /// multiple of 32.
  template <class First, class Body>
  bool launch_pair(std::uint64_t first_count, const First& first, const std::uint64_t* count, std::uint64_t scale,
                   const LaunchHint& hint, const Body& body) const {
    if (backend != Backend::cuda || hint.host == nullptr) return false;
#if SOAHEAP_HAS_CUDA
    const std::uint64_t expected = expected_items(hint, LaunchHint::kUnknown);
    if (expected > kPairMaxItems) return false;  // also without a hint (kUnknown)
    static const std::uint64_t resident_blocks = [] {
      int device = 0, cooperative = 0, blocks = 0;
      SOAHEAP_CUDA_CHECK(cudaGetDevice(&device));
      SOAHEAP_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
      if (cooperative == 0) return std::uint64_t{0};
      SOAHEAP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, preloaded<pair_kernel<First, Body>>(), kThreadsPerCudaBlock, 0));
      return static_cast<std::uint64_t>(blocks) * static_cast<std::uint64_t>(cuda_multiprocessors());
    }();
    if (expected > resident_blocks * kThreadsPerCudaBlock) return false;  // also when resident_blocks is 0
    // At least a block per SM, so that a list that grew far beyond its hint is still served by
    // the whole GPU (the first step of an empty list may need only one block).
    const std::uint64_t wanted =
        std::max((std::max(first_count, expected) + kThreadsPerCudaBlock - 1) / kThreadsPerCudaBlock, multiprocessor_count());
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeCooperative;
    attribute.val.cooperative = 1;
    launch_with(attribute, pair_kernel<First, Body>, std::min(wanted, resident_blocks), first, first_count, body, count, scale,
                hint.device);
    return true;
#else
    (void)first_count, (void)first, (void)count, (void)scale, (void)body;
    return false;
#endif
  }

#if SOAHEAP_HAS_CUDA
  /// The GPU's multiprocessors, at least 1; read once (the program's device is assumed not to change).
  static std::uint64_t multiprocessor_count() {
    static const std::uint64_t count = static_cast<std::uint64_t>(std::max(cuda_multiprocessors(), 1));
    return count;
  }

  /// Launches a counted kernel with programmatic stream serialization: where the kernel before it
  /// allows it (detail::allow_dependent_launch, parallel_do's enumeration), its launch overlaps
  /// that kernel, and it waits for that one's results in wait_for_previous_kernel before it reads
  /// its count (1.6 µs per parallel_do on an H100). Other kernels do not allow it: the trigger at
  /// the start of every kernel made a streaming loop 8 % slower
  /// (docs/decisions/012-snapshot-in-the-list-and-rows.md).
  template <class Body>
  void launch_after_previous(void (*kernel)(Body, const std::uint64_t*, std::uint64_t, std::uint64_t*), std::uint64_t blocks,
                             const Body& body, const std::uint64_t* count, std::uint64_t scale, std::uint64_t* last_total,
                             std::uint64_t threads = kThreadsPerCudaBlock) const {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    launch_with_threads(attribute, kernel, blocks, threads, body, count, scale, last_total);
  }

  /// for_each_counted_row_kernel<kRows> over about @p items items.
  template <int kRows, class Body>
  void launch_rows(std::uint64_t items, const Body& body, const std::uint64_t* count, std::uint64_t scale,
                   const LaunchHint& hint) const {
    constexpr std::uint64_t kItemsPerBlock = std::uint64_t{kThreadsPerCudaBlock} * kRows;
    launch_after_previous(for_each_counted_row_kernel<kRows, Body>, (items + kItemsPerBlock - 1) / kItemsPerBlock, body,
                          count, scale, hint.device);
  }

  /// Threads per block for a thread-per-item launch over the list of @p hint (spread_block_threads).
  static std::uint64_t block_threads_for(const LaunchHint& hint) {
    const std::uint64_t last = *static_cast<const volatile std::uint64_t*>(hint.host);
    if (last == LaunchHint::kUnknown) return kThreadsPerCudaBlock;
    return detail::spread_block_threads(last, multiprocessor_count());
  }

  /// Launches @p kernel on the heap's stream with @p blocks thread blocks and one launch @p attribute.
  template <class... Parameters, class... Arguments>
  void launch_with(const cudaLaunchAttribute& attribute, void (*kernel)(Parameters...), std::uint64_t blocks,
                   const Arguments&... arguments) const {
    launch_with_threads(attribute, kernel, blocks, kThreadsPerCudaBlock, arguments...);
  }

  /// launch_with, @p threads per block (a multiple of 32, at most kThreadsPerCudaBlock).
  template <class... Parameters, class... Arguments>
  void launch_with_threads(const cudaLaunchAttribute& attribute, void (*kernel)(Parameters...), std::uint64_t blocks,
                           std::uint64_t threads, const Arguments&... arguments) const {
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>(blocks));
    config.blockDim = dim3(static_cast<unsigned>(threads));
    config.stream = stream;
    cudaLaunchAttribute attributes[1] = {attribute};
    config.attrs = attributes;
    config.numAttrs = 1;
    SOAHEAP_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, arguments...));
  }
#endif

  /// Items a counted launch over a list should expect: the previous launch's count (from the @p
  /// hint) plus room to grow, or @p max_count without one.
  static std::uint64_t expected_items(const LaunchHint& hint, std::uint64_t max_count) {
    if (hint.host == nullptr) return max_count;
    // Written by the device while we read it: any value it had is a valid estimate.
    const std::uint64_t last = *static_cast<const volatile std::uint64_t*>(hint.host);
    return last == LaunchHint::kUnknown ? max_count : last + last / kLaunchHintHeadroom + kThreadsPerCudaBlock;
  }

  /// Waits for every launch so far (cuda) and reports a failed kernel.
  void synchronize() const {
    if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaStreamSynchronize(stream));
#endif
    }
  }
};

}  // namespace soaheap::detail
