#pragma once
/// @file dynasoar.h
/// @brief DynaSOAr source compatibility: programs written against DynaSOAr's public API
///        (prg-titech/dynasoar) build against soaheap with this header in place of DynaSOAr's
///        `dynasoar.h` — include it directly, or put compat/shim first on the include path so that
///        `#include "dynasoar.h"` finds it. See docs/dynasoar-migration.md.
///
/// Everything is implemented on top of soaheap's own API in namespace soaheap::compat::dynasoar
/// and declared in the global namespace under DynaSOAr's names, as DynaSOAr does. Compiled by a plain
/// C++ compiler (the host backend), the CUDA qualifiers DynaSOAr programs use (`__device__`,
/// `__host__`, `__forceinline__`) expand to nothing; kernels with `<<<...>>>` launches need nvcc.

#include <soaheap/soaheap.cuh>

#include <soaheap/compat/dynasoar/allocator_handle.h>
#include <soaheap/compat/dynasoar/class_model.h>
#include <soaheap/compat/dynasoar/soa_allocator.h>

#include <cstdio>
#include <cstdlib>

#if !defined(__CUDACC__)
// Host backend: the CUDA qualifiers of DynaSOAr programs mean nothing to a plain C++ compiler.
#ifndef __device__
#define __device__
#endif
#ifndef __host__
#define __host__
#endif
#ifndef __forceinline__
#define __forceinline__ inline
#endif
#endif

// DynaSOAr's helper macros.
#ifndef __DEV__
#define __DEV__ __device__
#endif
#ifndef __DEV_HOST__
#define __DEV_HOST__ __device__ __host__
#endif
#ifndef GCC_COMPILER
/// DynaSOAr selects a workaround for compilers other than GCC with this; soaheap needs none.
#define GCC_COMPILER 1
#endif

#if defined(__CUDACC__)
/// DynaSOAr's CUDA error check: prints the failing call's error and exits.
#ifndef gpuErrchk
#define gpuErrchk(ans) ::soaheap::compat::dynasoar::check_cuda((ans), __FILE__, __LINE__)
#endif
namespace soaheap::compat::dynasoar {
inline void check_cuda(cudaError_t code, const char* file, int line) {
  if (code != cudaSuccess) {
    std::fprintf(stderr, "GPUassert: %s %s %d\n", cudaGetErrorString(code), file, line);
    std::exit(static_cast<int>(code));
  }
}
}  // namespace soaheap::compat::dynasoar
#endif

// DynaSOAr's names live in the global namespace.
using soaheap::compat::dynasoar::AllocatorHandle;
using soaheap::compat::dynasoar::DeviceArray;
using soaheap::compat::dynasoar::Field;
using soaheap::compat::dynasoar::kMinDefragCandidates;
using soaheap::compat::dynasoar::SoaAllocator;
using soaheap::compat::dynasoar::SoaBase;
using soaheap::compat::dynasoar::SoaField;
using soaheap::compat::dynasoar::destroy;
