#pragma once
/// @file cuda_on_host.h
/// @brief The few CUDA runtime and device features that DynaSOAr's example programs use outside
///        the allocator API, emulated for a plain C++ compiler, so that such a program (its
///        `name<<<grid, block>>>(args)` launches rewritten to `soaheap_host::launch(grid, block,
///        [&] { name(args); })` by run.sh) runs on soaheap's host backend: under ThreadSanitizer
///        and AddressSanitizer, with the allocator's parallel_do spread over CPU worker threads.
///
/// Not a CUDA implementation: a launch runs its logical threads one after another on the calling
/// thread (the examples' raw kernels only initialize data; their concurrent work runs in the
/// handle's parallel_do, which the host backend runs on many threads). Atomics are GCC's seq_cst
/// builtins, which ThreadSanitizer understands; `__threadfence()` is a seq_cst fence (which
/// ThreadSanitizer does not model: a publication that relies on a fence alone is reported).
/// Force-included (`-include cuda_on_host.h`) ahead of the program's own headers.

#include <soaheap/compat/dynasoar.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#define __global__
#define __shared__ static
#define __constant__

#ifndef gpuErrchk
#define gpuErrchk(ans) (ans)
#endif

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The launch configuration of the logical thread being run (per OS thread, so that a raw launch
// on one thread never sees another's).
inline thread_local dim3 threadIdx{0, 0, 0};
inline thread_local dim3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

using cudaError_t = int;
constexpr cudaError_t cudaSuccess = 0;
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };

constexpr cudaError_t cudaErrorMemoryAllocation = 2;

inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

// "Device" memory of the programs' own arrays is host memory here.
template <typename T>
cudaError_t cudaMalloc(T** pointer, std::size_t bytes) {
  *pointer = static_cast<T*>(std::malloc(bytes));
  return *pointer != nullptr || bytes == 0 ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* destination, const void* source, std::size_t bytes, cudaMemcpyKind) {
  std::memcpy(destination, source, bytes);
  return cudaSuccess;
}
enum cudaLimit { cudaLimitStackSize, cudaLimitPrintfFifoSize, cudaLimitMallocHeapSize };
/// Host threads have their own (large) stacks: nothing to raise.
inline cudaError_t cudaDeviceSetLimit(cudaLimit, std::size_t) { return cudaSuccess; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaPeekAtLastError() { return cudaSuccess; }

template <typename Symbol>
cudaError_t cudaMemcpyToSymbol(Symbol& symbol, const void* source, std::size_t bytes, std::size_t offset = 0,
                               cudaMemcpyKind = cudaMemcpyHostToDevice) {
  std::memcpy(reinterpret_cast<char*>(&symbol) + offset, source, bytes);
  return cudaSuccess;
}

template <typename Symbol>
cudaError_t cudaMemcpyFromSymbol(void* destination, const Symbol& symbol, std::size_t bytes, std::size_t offset = 0,
                                 cudaMemcpyKind = cudaMemcpyDeviceToHost) {
  std::memcpy(destination, reinterpret_cast<const char*>(&symbol) + offset, bytes);
  return cudaSuccess;
}

inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long expected,
                                    unsigned long long desired) {
  __atomic_compare_exchange_n(address, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
inline int atomicCAS(int* address, int expected, int desired) {
  __atomic_compare_exchange_n(address, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
inline int atomicAdd(int* address, int value) { return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST); }
inline unsigned atomicAdd(unsigned* address, unsigned value) {
  return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST);
}
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

namespace soaheap_host {
/// Runs body() once per logical thread of a grid x block launch, in order, on the calling thread.
template <typename Body>
void launch(dim3 grid, dim3 block, Body&& body) {
  gridDim = grid;
  blockDim = block;
  for (unsigned b = 0; b < grid.x * grid.y * grid.z; ++b) {
    blockIdx = dim3(b % grid.x, b / grid.x % grid.y, b / (grid.x * grid.y));
    for (unsigned t = 0; t < block.x * block.y * block.z; ++t) {
      threadIdx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
      body();
    }
  }
}
}  // namespace soaheap_host
