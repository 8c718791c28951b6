#pragma once
/// @file detail/row_kernel_choice.cuh
/// @brief The run-time choice of the kernel that serves one method's long lists: the row kernel or
///        the pipelined one, measured per method on its first launches or fixed by
///        SOAHEAP_ROW_KERNEL (docs/decisions/013-row-kernel-measured-per-method.md).

#include <soaheap/core/errors.hpp>
#include <soaheap/core/detail/tuning.cuh>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>

#if SOAHEAP_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace soaheap::detail {

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
/// an H100 (docs/decisions/013-row-kernel-measured-per-method.md): a streaming method such
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
  static constexpr int kSamples = kRowKernelSamples;
  static constexpr double kMargin = kRowKernelMargin;

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

}  // namespace soaheap::detail
