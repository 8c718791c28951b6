#pragma once
/// @file detail/operation_timer.cuh
/// @brief Sums the GPU time of a recurring step of asynchronous operations (CUDA events recorded
///        around it, read only when the total is asked for), or its wall time on the host backend.

#include <soaheap/core/backend.cuh>

#include <chrono>
#include <utility>
#include <vector>

namespace soaheap::detail {

class OperationTimer {
 public:
  bool enabled = false;

  OperationTimer() = default;
  OperationTimer(const OperationTimer&) = delete;
  OperationTimer& operator=(const OperationTimer&) = delete;
  ~OperationTimer() {
#if SOAHEAP_HAS_CUDA
    for (auto& pair : free_) destroy(pair);
    for (auto& pair : pending_) destroy(pair);
#endif
  }

  void start(const Executor& executor) {
    if (!enabled) return;
    if (executor.backend == Backend::host) {
      host_start_ = std::chrono::steady_clock::now();
      return;
    }
#if SOAHEAP_HAS_CUDA
    if (pending_.size() >= kMaxPending) settle();
    if (free_.empty()) {
      Events pair{};
      SOAHEAP_CUDA_CHECK(cudaEventCreate(&pair.first));
      SOAHEAP_CUDA_CHECK(cudaEventCreate(&pair.second));
      free_.push_back(pair);
    }
    pending_.push_back(free_.back());
    free_.pop_back();
    SOAHEAP_CUDA_CHECK(cudaEventRecord(pending_.back().first, executor.stream));
#endif
  }

  void stop(const Executor& executor) {
    if (!enabled) return;
    if (executor.backend == Backend::host) {
      seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start_).count();
      return;
    }
#if SOAHEAP_HAS_CUDA
    SOAHEAP_CUDA_CHECK(cudaEventRecord(pending_.back().second, executor.stream));
#endif
  }

  /// Total seconds so far; waits for the recorded steps to finish.
  double seconds(const Executor&) {
#if SOAHEAP_HAS_CUDA
    settle();
#endif
    return seconds_;
  }

 private:
#if SOAHEAP_HAS_CUDA
  using Events = std::pair<cudaEvent_t, cudaEvent_t>;
  /// Events in flight before the oldest are read (bounds memory; reading waits for them).
  static constexpr std::size_t kMaxPending = 4096;

  void settle() {
    for (Events& pair : pending_) {
      SOAHEAP_CUDA_CHECK(cudaEventSynchronize(pair.second));
      float milliseconds = 0;
      SOAHEAP_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, pair.first, pair.second));
      seconds_ += milliseconds / 1000.0;
      free_.push_back(pair);
    }
    pending_.clear();
  }
  static void destroy(Events& pair) {
    cudaEventDestroy(pair.first);
    cudaEventDestroy(pair.second);
  }
  std::vector<Events> pending_;
  std::vector<Events> free_;
#endif
  std::chrono::steady_clock::time_point host_start_{};
  double seconds_ = 0;
};

}  // namespace soaheap::detail
