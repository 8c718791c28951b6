#pragma once
/// @file detail/kernel_preload.cuh
/// @brief Every kernel the executor launches is loaded when a cuda heap is made, not at its first
///        launch: `preloaded<Kernel>()` names a kernel at its launch site and registers it before
///        `main`; `load_preloaded_kernels()` (the heap's constructor) loads all registered ones.
///
/// Under lazy module loading (CUDA's default on Linux since 12.2) a kernel's code is loaded at its
/// first launch, under a driver lock that waits for the work already on the GPU. A kernel waiting
/// for the heap to grow needs that lock too (the grower maps memory through the driver), so a
/// kernel launched for the first time behind a growing one stalled both until the growth wait gave
/// up (10 s; a parallel_do queued behind a growing kernel on an H200). Loading them all at the
/// heap's construction, when none of its kernels runs yet, removes the hazard, and a process's first
/// allocation no longer pays for loading its kernel. Kernels the program launches itself are
/// its own to load (CUDA_MODULE_LOADING=EAGER, or a launch before the heap grows).

#include <soaheap/base/portability.cuh>

#include <cstddef>
#include <mutex>
#include <vector>

#if SOAHEAP_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace soaheap::detail {

/// The kernels named by preloaded<>() anywhere in the program, in the order their launch sites were
/// initialized, and how many of them are loaded.
class PreloadRegistry {
 public:
  static bool add(const void* kernel) {
    PreloadRegistry& registry = instance();
    const std::lock_guard<std::mutex> lock(registry.mutex_);
    registry.kernels_.push_back(kernel);
    return true;
  }

  /// Loads every registered kernel not loaded yet (cuda; nothing without it).
  static void load_all() {
#if SOAHEAP_HAS_CUDA
    PreloadRegistry& registry = instance();
    const std::lock_guard<std::mutex> lock(registry.mutex_);
    for (; registry.loaded_ < registry.kernels_.size(); ++registry.loaded_) {
      cudaFuncAttributes attributes{};
      // Asking for a kernel's attributes loads its code. A kernel that cannot be loaded for this GPU
      // is left to its launch to report, as it would be without preloading.
      if (cudaFuncGetAttributes(&attributes, registry.kernels_[registry.loaded_]) != cudaSuccess) (void)cudaGetLastError();
    }
#endif
  }

 private:
  static PreloadRegistry& instance() {
    static PreloadRegistry registry;  // built on first use: launch sites register during static initialization
    return registry;
  }
  std::mutex mutex_;
  std::vector<const void*> kernels_;
  std::size_t loaded_ = 0;
};

/// One registration per kernel, made during static initialization (a template's static member).
template <auto Kernel>
struct PreloadedKernel {
  static inline const bool registered = PreloadRegistry::add(reinterpret_cast<const void*>(Kernel));
};

/// @p Kernel, registered for load_preloaded_kernels(): write `preloaded<kernel<Args>>()` where the
/// executor launches or queries a kernel.
template <auto Kernel>
constexpr auto preloaded() {
  static_cast<void>(&PreloadedKernel<Kernel>::registered);
  return Kernel;
}

/// Loads every kernel registered so far (a cuda heap's constructor calls it).
inline void load_preloaded_kernels() { PreloadRegistry::load_all(); }

}  // namespace soaheap::detail
