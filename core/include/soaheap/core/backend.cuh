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
#endif

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
    if (count == 0) return;
    if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      constexpr std::uint64_t kMaxGrid = 1u << 20;  // grid-stride beyond ~268M threads
      const std::uint64_t blocks = (count + kThreadsPerCudaBlock - 1) / kThreadsPerCudaBlock;
      const unsigned grid = static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
      for_each_thread_kernel<<<grid, kThreadsPerCudaBlock, 0, stream>>>(body, count);
      SOAHEAP_CUDA_CHECK(cudaGetLastError());
      SOAHEAP_CUDA_CHECK(cudaStreamSynchronize(stream));
#else
      throw usage_error("the cuda backend is not compiled into this translation unit (compile it with nvcc)");
#endif
    } else {
      pool->run(count, [&body](std::uint64_t tid) { body(tid); });
    }
  }
};

}  // namespace detail
}  // namespace soaheap
