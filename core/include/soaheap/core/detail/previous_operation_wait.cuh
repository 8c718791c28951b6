#pragma once
/// @file detail/previous_operation_wait.cuh
/// @brief Keeps the host at most one operation ahead of the GPU: after launching an operation the
///        host waits for the one before it, not for the one it just launched.
///
/// Waiting for an operation's own end leaves the GPU idle from that end until the host's next
/// launch has reached it (about 7–9 µs on an H100, docs/decisions/023-dynasoar-handle-waits-for-the-previous-operation.md); waiting for the
/// previous one instead finds the next operation already queued behind the current one. Two CUDA
/// events on the executor's stream, used in turn (no timing); nothing on the host backend, whose
/// operations have finished when they return.

#include <soaheap/core/backend.cuh>

namespace soaheap::detail {

class PreviousOperationWait {
 public:
  PreviousOperationWait() = default;
  PreviousOperationWait(const PreviousOperationWait&) = delete;
  PreviousOperationWait& operator=(const PreviousOperationWait&) = delete;
  ~PreviousOperationWait() {
#if SOAHEAP_HAS_CUDA
    for (cudaEvent_t event : events_)
      if (event != nullptr) cudaEventDestroy(event);
#endif
  }

  /// Marks the end of the operation just launched on @p executor's stream, then waits for the mark
  /// of the operation before it (if there was one).
  /// @throw cuda_error when a kernel before that mark failed
  void mark_and_wait_for_previous(const Executor& executor) {
    if (executor.backend != Backend::cuda) return;
#if SOAHEAP_HAS_CUDA
    cudaEvent_t& mark = events_[next_];
    if (mark == nullptr) SOAHEAP_CUDA_CHECK(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming));
    SOAHEAP_CUDA_CHECK(cudaEventRecord(mark, executor.stream));
    next_ ^= 1;
    // The other event marks the previous operation (an event never recorded counts as complete).
    if (events_[next_] != nullptr) SOAHEAP_CUDA_CHECK(cudaEventSynchronize(events_[next_]));
#endif
  }

 private:
#if SOAHEAP_HAS_CUDA
  cudaEvent_t events_[2] = {nullptr, nullptr};
#endif
  int next_ = 0;
};

}  // namespace soaheap::detail
