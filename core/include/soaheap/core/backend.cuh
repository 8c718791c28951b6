#pragma once
/// @file backend.cuh
/// @brief The two backends and how a kernel body is launched on each: a CUDA grid, or the host thread pool.

#include <soaheap/core/errors.hpp>
#include <soaheap/base/portability.cuh>
#include <soaheap/core/thread_pool.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#if SOAHEAP_HAS_CUDA
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

namespace detail {

inline constexpr unsigned kThreadsPerCudaBlock = 256;

#if SOAHEAP_HAS_CUDA
template <class Body>
__global__ void for_each_thread_kernel(Body body, std::uint64_t count) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; tid < count;
       tid += stride) {
    body(tid);
  }
}

/// The thread count lives in device memory (written by an earlier kernel of the same stream), so
/// the host launches without waiting for it and the grid strides over whatever it finds. When
/// @p last_total is given (host memory mapped into the device), thread 0 leaves the count there so
/// that the host can size the next launch over the same list.
template <class Body>
__global__ void for_each_counted_thread_kernel(Body body, const std::uint64_t* count, std::uint64_t scale,
                                               std::uint64_t* last_total) {
  const std::uint64_t total = *count * scale;
  if (last_total != nullptr && blockIdx.x == 0 && threadIdx.x == 0) *static_cast<volatile std::uint64_t*>(last_total) = total;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; tid < total;
       tid += stride) {
    body(tid);
  }
}
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
  template <class Body>
  void launch_counted(const std::uint64_t* count, std::uint64_t scale, std::uint64_t max_count, const LaunchHint& hint,
                      const Body& body) const {
    if (max_count == 0) return;
    if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      const std::uint64_t bound = (max_count + kThreadsPerCudaBlock - 1) / kThreadsPerCudaBlock;
      std::uint64_t blocks = 0;
      if (hint.host == nullptr) {
        // One wave (computed once per kernel; the program's device is assumed not to change).
        static const std::uint64_t resident = [] {
          int per_multiprocessor = 0;
          SOAHEAP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
              &per_multiprocessor, for_each_counted_thread_kernel<Body>, kThreadsPerCudaBlock, 0));
          const int multiprocessors = cuda_multiprocessors();
          return static_cast<std::uint64_t>(per_multiprocessor < 1 ? 1 : per_multiprocessor) *
                 static_cast<std::uint64_t>(multiprocessors < 1 ? 1 : multiprocessors);
        }();
        blocks = resident;
      } else {
        // Written by the device while we read it: any value it had is a valid estimate.
        const std::uint64_t last = *static_cast<const volatile std::uint64_t*>(hint.host);
        const std::uint64_t expected = last == LaunchHint::kUnknown ? max_count : last + last / 8 + kThreadsPerCudaBlock;
        blocks = (expected + kThreadsPerCudaBlock - 1) / kThreadsPerCudaBlock;
      }
      const unsigned grid = static_cast<unsigned>(blocks < bound ? blocks : bound);
      for_each_counted_thread_kernel<<<grid, kThreadsPerCudaBlock, 0, stream>>>(body, count, scale, hint.device);
      SOAHEAP_CUDA_CHECK(cudaGetLastError());
#else
      throw usage_error("the cuda backend is not compiled into this translation unit (compile it with nvcc)");
#endif
    } else {
      (void)hint;  // the host pool sizes nothing
      const std::uint64_t total = atomic_load(count) * scale;
      if (total != 0) pool->run(total, [&body](std::uint64_t tid) { body(tid); });
    }
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
