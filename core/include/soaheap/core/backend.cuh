#pragma once
/// @file backend.cuh
/// @brief The two backends and how a kernel body is launched on each: a CUDA grid, or the host thread pool.

#include <soaheap/core/errors.hpp>
#include <soaheap/base/portability.cuh>
#include <soaheap/core/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#if SOAHEAP_HAS_CUDA
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#endif

namespace soaheap {

/// @brief Where a heap lives and its kernels run.
enum class Backend { host, cuda };

inline std::string_view to_string(Backend backend) { return backend == Backend::cuda ? "cuda" : "host"; }

/// @brief Parses "host" or "cuda".
/// @throw invalid_argument naming the value otherwise
inline Backend parse_backend(std::string_view name) {
  if (name == "host") return Backend::host;
  if (name == "cuda") return Backend::cuda;
  throw invalid_argument("unknown backend '" + std::string(name) + "': expected 'host' or 'cuda'");
}

/// @brief Multiprocessors of the current CUDA device (0 without one).
inline int cuda_multiprocessors() {
#if SOAHEAP_HAS_CUDA
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) return 0;
  return count;
#else
  return 0;
#endif
}

/// @brief True when this translation unit can run the cuda backend and a GPU is present.
inline bool cuda_available() {
#if SOAHEAP_HAS_CUDA
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
#else
  return false;
#endif
}

/// @brief The device a heap of @p backend runs on, in words: the GPU's name, or the host's threads.
inline std::string describe_device(Backend backend, unsigned host_threads) {
#if SOAHEAP_HAS_CUDA
  if (backend == Backend::cuda) {
    int device = 0;
    cudaDeviceProp properties{};
    if (cudaGetDevice(&device) == cudaSuccess && cudaGetDeviceProperties(&properties, device) == cudaSuccess)
      return properties.name;
  }
#endif
  if (backend == Backend::cuda) return "CUDA GPU";
  return "host CPU, " + std::to_string(host_threads) + " worker threads (" +
         std::to_string(std::thread::hardware_concurrency()) + " hardware threads)";
}

namespace detail {

/// @brief The host backend's worker count for a heap that asked for @p requested (0 = default):
/// SOAHEAP_HOST_THREADS when set (programs that cannot pass options, e.g. DynaSOAr's through the
/// shim, run under the sanitizers with more threads than cores), else 0 = all cores.
/// @throw invalid_argument naming the variable's value when it is not a count from 1 to 4096
inline unsigned host_thread_count(unsigned requested) {
  if (requested != 0) return requested;
  const char* text = std::getenv("SOAHEAP_HOST_THREADS");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const unsigned long value = std::strtoul(text, &end, 10);
  if (*end != '\0' || value < 1 || value > 4096)  // "-2" wraps to a huge value: refused too
    throw invalid_argument(std::string("soaheap: SOAHEAP_HOST_THREADS=\"") + text +
                           "\" is not a worker thread count from 1 to 4096");
  return static_cast<unsigned>(value);
}

inline constexpr unsigned kThreadsPerCudaBlock = 256;
/// Thread blocks of kThreadsPerCudaBlock that one multiprocessor holds at full occupancy (2048
/// resident threads on sm_70..sm_90).
inline constexpr unsigned kFullBlocksPerMultiprocessor = 2048 / kThreadsPerCudaBlock;
/// for_each_pipelined_row_kernel serves a list only when it fills the GPU 2·16 times over (8.6 M
/// items on an H100: at least 32 rows per thread), and only where measured faster (RowKernelChoice).
inline constexpr int kPipelinedRows = 16;

/// Threads per block for a launch of one thread per item over @p items items on a GPU of
/// @p multiprocessors SMs: kThreadsPerCudaBlock, or, for a list shorter than one such block per
/// SM, the power of two down to 32 that leaves the fewest warps on the busiest SM (the larger on a
/// tie). 20,000 items are 79 blocks of 256 threads on an H100's 132 SMs (eight warps on 79 SMs,
/// none on 53) or 625 blocks of 32 (at most five warps on any): a heavy method over a short list
/// (an all-pairs force loop) is then shared by every SM, and each scheduler has fewer warps to
/// interleave. DynaSOAr's nbody through the shim: its force kernel 8.84 → 8.47 ms, the program
/// 3.66 → 3.50 s. Longer lists keep 256: spreading every list (lists of up to 32 warps per SM
/// went to blocks of 32) made generation 4–9 % and wa-tor 3 % slower (docs/performance.md,
/// twelfth pass).
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
/// a loop over plain arrays (docs/performance.md, "The core loop").
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
/// over 16.7 M objects on an H100: 1.126 → 1.072–1.076× the plain arrays; docs/performance.md,
/// sixteenth pass). Warming reads every field of the next object, also those its method does not
/// read: the measured choice (RowKernelChoice) keeps the row kernel for methods where that costs
/// more than it saves. The grid is the kernel's resident thread blocks
/// (Executor::launch_counted) and its rows are dealt to them in turn, so every thread block
/// serves the same number of rows, give or take one, and the grid ends together: with runs of
/// 16 consecutive rows per thread block, a grid of 4,096 thread blocks over 16.7 M objects
/// filled the GPU 3.9 times and the last, partial round left SMs idle (axpy over 13.4–20.1 M
/// objects on an H100: 1.12–1.20× the plain arrays, by the fraction of the last round;
/// docs/performance.md, sixteenth pass). Which of this kernel and the row kernel serves a method
/// is measured (RowKernelChoice): latency-bound methods want the row kernel's many more threads
/// (game-of-life 5 % slower with every long list pipelined).
template <class Body>
__global__ void for_each_pipelined_row_kernel(Body body, const std::uint64_t* count, std::uint64_t scale,
                                              std::uint64_t* last_total) {
  const std::uint64_t total = counted_total(count, scale, last_total);
  // 32-bit indices where no index the loop forms can reach 2^32: a 64-bit index costs two
  // instructions per compare and add (axpy over 16.7 M objects on an H100: 1.132 -> 1.126 times the
  // plain arrays, docs/performance.md, fifteenth pass).
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

/// The row kernel a method's long lists get: measured (RowKernelChoice), or fixed by
/// SOAHEAP_ROW_KERNEL=rows|pipelined for reproducible timings.
enum class RowKernel { measured, rows, pipelined };

/// @brief Parses SOAHEAP_ROW_KERNEL's value (nullptr, the variable not set: measured).
/// @throw invalid_argument naming the value when it is none of auto, rows, pipelined (also when
///        it is empty: set to nothing is a mistake, as for the defragmentation variables)
inline RowKernel parse_row_kernel(const char* value) {
  if (value == nullptr) return RowKernel::measured;
  const std::string_view name = value;
  if (name == "auto") return RowKernel::measured;
  if (name == "rows") return RowKernel::rows;
  if (name == "pipelined") return RowKernel::pipelined;
  throw invalid_argument("soaheap: SOAHEAP_ROW_KERNEL=\"" + std::string(name) + "\" is not auto, rows or pipelined");
}

#if SOAHEAP_HAS_CUDA
/// Which kernel serves one method's long lists (Executor::launch_counted): the row kernel (rows
/// whose list entries are all loaded first) or the pipelined one (a resident grid, list entries
/// loaded and the next object's fields warmed in L2 while a row runs). Neither wins everywhere on
/// an H100 (docs/performance.md, fifth, fourteenth and sixteenth passes): a streaming method such
/// as axpy runs fastest pipelined; game-of-life's latency-bound neighbour walks were 5 % slower
/// so, with fewer threads, and a method that reads few of its class's fields pays for warming them
/// all. So each method (each kernel body type: one static
/// object per instantiation) measures both on its first long-list launches: each kernel once
/// untimed (first launches load code), then kSamples of each, alternating, between CUDA events
/// that nobody waits for. A later launch that finds the last event complete compares the times per
/// expected item and keeps the pipelined kernel only if it was kMargin faster; until then, and
/// wherever the events cannot be used, the row kernel runs.
class RowKernelChoice {
 public:
  static constexpr int kSamples = 3;
  static constexpr double kMargin = 0.03;

  struct Launch {
    bool pipelined = false;
    int sample = -1;  ///< >= 0: the launch is timed as this sample
  };

  /// Before a launch over about @p items items on @p stream: which kernel, and whether timed
  /// (then its start event is recorded here).
  Launch begin(cudaStream_t stream, std::uint64_t items) {
    const int decided = decided_.load(std::memory_order_acquire);
    if (decided >= 0) return {decided == 1, -1};
    std::lock_guard<std::mutex> lock(mutex_);
    if (decided_.load(std::memory_order_relaxed) < 0 && launches_ == 0) {
      const RowKernel fixed = parse_row_kernel(std::getenv("SOAHEAP_ROW_KERNEL"));
      if (fixed != RowKernel::measured) decide(fixed == RowKernel::pipelined);
    }
    if (decided_.load(std::memory_order_relaxed) >= 0) return {decided_.load(std::memory_order_relaxed) == 1, -1};
    const int launch = launches_++;
    if (launch < 2) return {launch == 1, -1};  // warm-up: each kernel once
    int device = -1;
    if (cudaGetDevice(&device) != cudaSuccess) return {};
    const int sample = launch - 2;
    if (sample == 0) {
      device_ = device;
      for (int i = 0; i < 2 * kSamples; ++i)
        if (cudaEventCreate(&start_[i]) != cudaSuccess || cudaEventCreate(&end_[i]) != cudaSuccess) {
          decide(false);  // no events, no measurement: the row kernel
          return {};
        }
    }
    if (device != device_) return {};  // another GPU's stream cannot record these events
    if (sample < 2 * kSamples) {
      items_[sample] = items == 0 ? 1 : items;
      if (cudaEventRecord(start_[sample], stream) != cudaSuccess) {
        decide(false);
        return {};
      }
      return {sample % 2 == 1, sample};
    }
    if (ended_ < 2 * kSamples) return {};  // a timed launch of another thread is still being made
    double per_item[2] = {0, 0};
    for (int i = 0; i < 2 * kSamples; ++i) {  // (samples of several heaps may be in several streams)
      const cudaError_t done = cudaEventQuery(end_[i]);
      if (done == cudaErrorNotReady) return {};
      float milliseconds = 0;
      if (done != cudaSuccess || cudaEventElapsedTime(&milliseconds, start_[i], end_[i]) != cudaSuccess) {
        decide(false);  // a failed kernel is reported by the next synchronizing call, not here
        return {};
      }
      per_item[i % 2] += milliseconds / static_cast<double>(items_[i]);
    }
    decide(per_item[1] < (1.0 - kMargin) * per_item[0]);
    return {decided_.load(std::memory_order_relaxed) == 1, -1};
  }

  /// After the launch that begin() answered: records its end event if it was timed.
  void end(const Launch& launch, cudaStream_t stream) {
    if (launch.sample < 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (cudaEventRecord(end_[launch.sample], stream) != cudaSuccess) {
      decide(false);
      return;
    }
    ++ended_;
  }

 private:
  void decide(bool pipelined) {
    if (launches_ >= 3 && device_ >= 0) {
      for (int i = 0; i < 2 * kSamples; ++i) {
        if (start_[i] != nullptr) cudaEventDestroy(start_[i]);
        if (end_[i] != nullptr) cudaEventDestroy(end_[i]);
        start_[i] = end_[i] = nullptr;
      }
    }
    decided_.store(pipelined ? 1 : 0, std::memory_order_release);
  }

  std::atomic<int> decided_{-1};  ///< -1 while measuring, 0 row kernel, 1 pipelined
  std::mutex mutex_;
  int launches_ = 0;
  int ended_ = 0;
  int device_ = -1;
  cudaEvent_t start_[2 * kSamples] = {};
  cudaEvent_t end_[2 * kSamples] = {};
  std::uint64_t items_[2 * kSamples] = {};
};
#endif

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
      constexpr std::uint64_t kMaxGrid = 1u << 20;  // grid-stride beyond ~268M threads
      const std::uint64_t blocks = (count + kThreadsPerCudaBlock - 1) / kThreadsPerCudaBlock;
      const unsigned grid = static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
      for_each_thread_kernel<<<grid, kThreadsPerCudaBlock, 0, stream>>>(body, count);
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
      constexpr auto thread_kernel = counted_thread_kernel<Body>();
      static const std::uint64_t resident_blocks = blocks_per_multiprocessor(thread_kernel) * multiprocessor_count();
      const std::uint64_t expected = expected_items(hint, max_count);
      if constexpr (kRows > 1) {
        constexpr std::uint64_t full = kFullBlocksPerMultiprocessor;
        static const bool light = blocks_per_multiprocessor(for_each_counted_row_kernel<kRows, Body>) >= full;
        const std::uint64_t waves = resident_blocks * kThreadsPerCudaBlock;
        if (light && hint.host != nullptr && expected >= 2 * kRows * waves) {
          static const bool pipelined_light =
              blocks_per_multiprocessor(for_each_pipelined_row_kernel<Body>) >= full;
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
        SOAHEAP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, for_each_summed_thread_kernel<Body>,
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

  /// Items the second step of launch_pair may expect at most: a tiny list. With more, the steps
  /// run as two launches. Measured on an H100: collision's O(n²) methods over 65 k bodies ran 42 %
  /// slower as one cooperative grid (7.28 s against 5.13 s) — a grid of resident blocks gives a
  /// heavy method neither the blocks nor the dynamic scheduling of its own launch.
  static constexpr std::uint64_t kPairMaxItems = 64 * kThreadsPerCudaBlock;

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
      SOAHEAP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, pair_kernel<First, Body>, kThreadsPerCudaBlock, 0));
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
  /// the start of every kernel made a streaming loop 8 % slower (docs/performance.md).
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
    return last == LaunchHint::kUnknown ? max_count : last + last / 8 + kThreadsPerCudaBlock;
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

}  // namespace detail
}  // namespace soaheap
