#pragma once
/// @file app.cuh
/// @brief An application's run on its heap: `AppRun` joins the host harness (options, result line,
///        configuration, profile: examples/harness/harness.hpp, compiled once by the C++ compiler)
///        to the heap and its defragmentation policy, which are the only parts compiled with the
///        application's kernels.
///
/// Usage:
/// @code
///   soaheap_app::Cli cli = soaheap_app::application_cli("my app", {/*host_size*/ 1000, /*cuda_size*/ 1 << 20, 20, 200});
///   if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
///   const soaheap_app::AppOptions options = cli.options();
///   MyHeap heap(soaheap::HeapOptions{.objects = ..., .backend = options.backend});
///   soaheap_app::AppRun<MyHeap> run("my_app", options, heap);
///   for (int i = 0; i < options.iterations; ++i) { step(heap); run.after_iteration(i); }
///   return run.finish(self_check_ok, extra);
/// @endcode
/// stdout carries only the JSON result line; logs go to stderr.

#include "examples/common/cli.cuh"
#include "examples/harness/harness.hpp"

#include <soaheap/defrag/policy.hpp>
#include <soaheap/soaheap.cuh>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace soaheap_app {

/// @brief What the harness needs to know about @p heap.
template <class Heap>
HeapDescription describe(const Heap& heap) {
  HeapDescription description;
  description.backend = heap.backend();
  description.device = soaheap::describe_device(heap.backend(), heap.host_threads());
  description.heap_bytes = heap.heap_bytes();
  description.block_bytes = heap.block_bytes();
  for (int c = 0; c < Heap::kClassCount; ++c) {
    const bool abstract = Heap::class_is_abstract(c);
    description.classes.push_back({Heap::class_name(c), abstract ? 0 : Heap::capacity_of_class(c), abstract});
  }
  return description;
}

/// @brief Per-run bookkeeping of an application: create it right after the heap, call
///        `after_iteration(i)` at the end of every iteration and `finish(...)` once at the end.
///
/// The harness loads the defragmentation configuration (file, environment, then --defrag-policy,
/// --defrag-factor and --defrag-locality-window); AppRun sets the heap's factors from it, runs the
/// policy after each iteration, writes the profile (when asked) and times the run. The peak of
/// allocated blocks is kept on the device by the allocator.
/// @throw soaheap::config_error for an invalid configuration, policy spec or factor
template <class Heap>
class AppRun {
 public:
  AppRun(const std::string& app_name, const AppOptions& options, Heap& heap)
      : session_(app_name, options, describe(heap)), policy_(session_.config()), heap_(heap) {
    for (int c = 0; c < Heap::kClassCount; ++c) {
      // A one-slot block is always full: nothing to merge.
      if (Heap::class_is_abstract(c) || Heap::capacity_of_class(c) < 2) continue;
      heap.set_defrag_factor(c, session_.config().factor_for(Heap::class_name(c)));
    }
    device_free_start_ = device_free_least_ = device_free_bytes();
    if (session_.sample_due(0)) session_.sample(heap.stats(), 0);
  }

  AppRun(const AppRun&) = delete;
  AppRun& operator=(const AppRun&) = delete;

  /// @brief Samples the profile (when one is written), then lets the policy defragment. Without a
  /// profile and with no defragmentation due this waits for nothing.
  /// @param iteration the iteration that just ended, from 0
  void after_iteration(long long iteration) {
    const long long done = iteration + 1;
    if (session_.sample_due(done)) session_.sample(heap_.stats(), done);
    // Operations run asynchronously: let the iteration's kernels finish first, so that the time
    // charged to defragmentation is the policy's own (it waits for the GPU anyway when it looks).
    if (policy_.config().policy != soaheap::DefragPolicyKind::manual) heap_.synchronize();
    const auto start = std::chrono::steady_clock::now();
    // The policy counts completed iterations, as the profile does: every:M fires after M, 2M, ...
    const std::vector<soaheap::DefragResult> results = policy_.maybe_defrag(heap_, done);
    session_.record(done, results, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (heap_.growable()) {  // memory over time; a fixed heap holds the same all along
      // The device's free memory only at a new peak: cudaMemGetInfo is a driver call that each
      // iteration of a growing run paid and a fixed one did not.
      const std::uint64_t resident = heap_.resident_bytes();
      if (resident > peak_resident_) {
        peak_resident_ = resident;
        device_free_least_ = std::min(device_free_least_, device_free_bytes());
      }
    }
  }

  /// @brief Defines order @p name ("field:NAME" or "key:NAME") of concrete class C: the policy then
  /// compacts C in that order, the first order of a class being its default (the configuration's
  /// `order` of the class may name another or "none"); see soaheap::DefragPolicy::define_order.
  template <class C, class Order>
  void define_order(const std::string& name, const Order& order) {
    policy_.template define_order<C>(heap_, name, order);
  }

  /// @brief Seconds spent in defragmentation so far (measured around the policy).
  double defrag_seconds() const { return session_.defrag_seconds(); }
  /// @brief Seconds since this object was created.
  double elapsed_seconds() const { return session_.elapsed_seconds(); }
  /// @brief Ends the timed part of the run (setup and iterations, what a user's program does):
  /// waits for the GPU and throws errors it recorded. Checks after it are timed separately.
  void stop_clock() {
    if (session_.clock_stopped()) return;
    heap_.synchronize();
    session_.stop_clock();
  }
  std::uint64_t peak_allocated_blocks() const { return heap_.peak_allocated_blocks(); }
  long long defrag_runs() const { return session_.defrag_runs(); }

  /// @brief Prints the JSON result line to stdout and closes the profile.
  /// @return the process exit code: 0 iff @p self_check_passed
  int finish(bool self_check_passed, const Result& extra = {}) {
    stop_clock();
    Session::HeapFigures figures;
    figures.stats = heap_.stats();
    figures.peak_allocated_blocks = heap_.peak_allocated_blocks();
    figures.enumeration_seconds = heap_.enumeration_seconds();
    figures.peak_resident_bytes = std::max(peak_resident_, heap_.resident_bytes());
    figures.device_free_start = device_free_start_;
    figures.device_free_least = std::min(device_free_least_, device_free_bytes());
    figures.resident_before_trim = figures.resident_after_trim = heap_.resident_bytes();
    if (heap_.growable()) {  // after the timed part: what giving memory back would leave
      figures.resident_after_trim = soaheap::trim(heap_).resident_after;
      figures.longest_growth_ns = heap_.longest_growth_nanoseconds();
    }
    figures.device_free_end = device_free_bytes();
    return session_.finish(figures, self_check_passed, extra);
  }

 private:
  /// The device's free memory (cuda), 0 on the host backend.
  std::uint64_t device_free_bytes() const {
#if SOAHEAP_HAS_CUDA
    if (heap_.backend() == soaheap::Backend::cuda) {
      std::size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) return free_bytes;
    }
#endif
    return 0;
  }

  Session session_;
  soaheap::DefragPolicy policy_;
  Heap& heap_;
  std::uint64_t peak_resident_ = 0;
  std::uint64_t device_free_start_ = 0;
  std::uint64_t device_free_least_ = 0;
};

/// @brief The heap options of an application (@p fixed: its own sizing), a fixed heap of the size
/// the run gives (--heap-mib), or a growing heap when the run asks for one (--grow-from-mib,
/// --max-heap-mib).
inline soaheap::HeapOptions heap_options_for(soaheap::HeapOptions fixed, const AppOptions& options) {
  if (options.heap_fixed_bytes != 0) {  // --heap-mib
    fixed.objects = 0;
    fixed.bytes = options.heap_fixed_bytes;
    return fixed;
  }
  if (options.heap_start_bytes == 0) return fixed;
  fixed.objects = 0;
  fixed.bytes = options.heap_start_bytes;
  fixed.max_bytes = options.heap_max_bytes != 0 ? options.heap_max_bytes : soaheap::HeapOptions::kAllMemory;
  return fixed;
}

}  // namespace soaheap_app
