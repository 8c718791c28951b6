#pragma once
/// @file backend.cuh
/// @brief The two backends: where a heap lives and its kernels run (a CUDA grid or the host thread
///        pool), and what this machine offers. How a kernel body is launched on either is the
///        executor's (detail/executor.cuh, included at the end for the headers that launch); its
///        kernels are in detail/launch_kernels.cuh, its constants in detail/tuning.cuh.

#include <soaheap/core/errors.hpp>
#include <soaheap/base/portability.cuh>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

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

}  // namespace detail
}  // namespace soaheap

// The executor needs the Backend above; every header that includes this one launches through it.
#include <soaheap/core/detail/executor.cuh>
