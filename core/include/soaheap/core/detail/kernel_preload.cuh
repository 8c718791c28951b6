#pragma once
/// @file detail/kernel_preload.cuh
/// @brief Every kernel the executor launches is loaded when a cuda heap is made, not at its first
///        launch: `preloaded<Kernel>()` names a kernel at its launch site and registers it before
///        `main`; `load_preloaded_kernels()` (the heap's constructor) loads all registered ones.
///
/// Under lazy module loading (CUDA's default on Linux since 12.2) a kernel's code is loaded at its
/// first launch. While a growing heap's grower answered with copies, such a load held the copies
/// up and a kernel waiting for growth gave up after 10 s (decision 027); the grower only maps now,
/// which a load does not hold up. Loading the heap's kernels when it is made still keeps loading
/// out of a process's first operations.

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
