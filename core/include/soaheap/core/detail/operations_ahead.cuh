#pragma once
/// @file detail/operations_ahead.cuh
/// @brief Keeps the host at most a given number of operations ahead of the GPU: each call marks
///        the end of what was launched so far and waits for the mark made that many calls before.
///
/// Depth 1, after each operation (the DynaSOAr handle's synchronous mode): waiting for an
/// operation's own end leaves the GPU idle from that end until the host's next launch has reached
/// it (about 7–9 µs on an H100, docs/decisions/023-dynasoar-handle-waits-for-the-previous-operation.md);
/// waiting for the previous one instead finds the next operation already queued behind the current.
/// Deeper, before each operation of a growable heap: a host that never waits fills the launch
/// queue, a launch into a full queue blocks inside the driver, and the growth of a kernel queued
/// before it waited behind it (generation with no defragmentation, growing from 64 MiB on an
/// H200, while the grower still answered with copies: a kernel waited 10 s and failed). Kernels a
/// program launches itself with heap.view() are not counted. CUDA events on
/// the executor's stream, used in turn (no timing); nothing on the host backend, whose operations
/// have finished when they return.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/detail/executor.cuh>

#include <vector>

namespace soaheap::detail {

class OperationsAhead {
 public:
  /// @param depth operations the host may be ahead (at least 1)
  explicit OperationsAhead(int depth) : marks_(static_cast<std::size_t>(depth < 1 ? 1 : depth) + 1) {}
  OperationsAhead(const OperationsAhead&) = delete;
  OperationsAhead& operator=(const OperationsAhead&) = delete;
  ~OperationsAhead() {
#if SOAHEAP_HAS_CUDA
    for (cudaEvent_t mark : marks_)
      if (mark != nullptr) cudaEventDestroy(mark);
#endif
  }

  /// Marks the end of the work launched so far on @p executor's stream, then waits for the mark
  /// made depth calls before (if there was one).
  /// @throw cuda_error when a kernel before that mark failed
  void mark_and_wait(const Executor& executor) {
    if (executor.backend != Backend::cuda) return;
#if SOAHEAP_HAS_CUDA
    cudaEvent_t& mark = marks_[next_];
    if (mark == nullptr) SOAHEAP_CUDA_CHECK(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming));
    SOAHEAP_CUDA_CHECK(cudaEventRecord(mark, executor.stream));
    next_ = (next_ + 1) % marks_.size();
    // The oldest mark (an event never recorded counts as complete).
    if (marks_[next_] != nullptr) SOAHEAP_CUDA_CHECK(cudaEventSynchronize(marks_[next_]));
#endif
  }

 private:
#if SOAHEAP_HAS_CUDA
  std::vector<cudaEvent_t> marks_;
#else
  std::vector<void*> marks_;
#endif
  std::size_t next_ = 0;
};

}  // namespace soaheap::detail
