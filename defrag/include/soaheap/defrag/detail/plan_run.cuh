#pragma once
/// @file detail/plan_run.cuh
/// @brief Runs the compaction plan (compaction_plan.cuh) over every concrete subclass of T: all its
///        kernels are enqueued on the heap's stream without waiting, into scratch buffers the heap
///        keeps for defragmentation (made on the first run, sized by the heap's block count, never
///        grown afterwards), and the host reads the counters once, at the end. Phases are timed by
///        CUDA events (wall time on the host backend).

#include <soaheap/core/detail/operation_timer.cuh>
#include <soaheap/core/heap.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/defrag/defrag_options.hpp>
#include <soaheap/defrag/detail/compaction_plan.cuh>
#include <soaheap/base/log.hpp>
#include <soaheap/defrag/detail/rewrite_pointers.cuh>

#include <cstdint>
#include <type_traits>
#include <vector>

#if SOAHEAP_HAS_CUDA
#include <cub/device/device_scan.cuh>
#endif

namespace soaheap::detail {

/// Phases of a plan run, in order, as they appear in DefragPhaseTimes.
enum PlanPhase { kPlanPhaseScan, kPlanPhaseCopy, kPlanPhaseRewrite, kPlanPhaseState, kPlanPhaseCount };

/// Persistent per-heap scratch of the plan strategy (a Heap attachment).
struct PlanScratch {
  Memory flows;        ///< PlanFlow[M]
  Memory offsets;      ///< PlanFlow[M]
  Memory frozen;       ///< u64[M]
  Memory donor_bits;   ///< u64[ceil(M/64)] donor bits, then u64[ceil(M/64)] partial-donor bits
  Memory lists;        ///< u32[classes][M]: allocated blocks per class
  Memory counts;       ///< PlanCounts[classes], then u64[classes] holder list counts
  Memory windows;      ///< WindowPlan[ceil(M / window)], for the smallest window asked for so far
  Memory scan_temp;    ///< CUB temporary storage of the scan
  std::vector<PlanCounts> host_counts;
  OperationTimer timers[kPlanPhaseCount];
  std::uint64_t block_count = 0;
  int class_count = 0;

  PlanScratch() {
    for (OperationTimer& timer : timers) timer.enabled = true;
  }

  void ensure(Backend backend, std::uint64_t blocks, int classes) {
    if (block_count == blocks && class_count == classes) return;
    flows = Memory(backend, blocks * sizeof(PlanFlow));
    offsets = Memory(backend, blocks * sizeof(PlanFlow));
    frozen = Memory(backend, blocks * sizeof(std::uint64_t));
    donor_bits = Memory(backend, 2 * donor_words(blocks) * sizeof(std::uint64_t));
    lists = Memory(backend, static_cast<std::uint64_t>(classes) * blocks * sizeof(std::uint32_t));
    counts = Memory(backend, static_cast<std::uint64_t>(classes) * (sizeof(PlanCounts) + sizeof(std::uint64_t)));
    host_counts.assign(static_cast<std::size_t>(classes), PlanCounts{});
    block_count = blocks;
    class_count = classes;
#if SOAHEAP_HAS_CUDA
    // The scan's temporary storage too: an allocation inside the timed scan (cudaMalloc, the GPU
    // idle meanwhile) made a first run's scan 0.8 ms slower on an H100.
    if (backend == Backend::cuda) {
      std::size_t bytes = 0;
      SOAHEAP_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(nullptr, bytes, flows.as<PlanFlow>(), offsets.as<PlanFlow>(),
                                                        AddFlows{}, PlanFlow{0, 0}, static_cast<std::int64_t>(blocks)));
      scan_temp = Memory(Backend::cuda, bytes);
    }
#endif
  }

  static std::uint64_t donor_words(std::uint64_t blocks) { return (blocks + 63) / 64; }

  /// Blocks per window for @p locality_window (0: all of them), and room for that many windows.
  std::uint64_t prepare_windows(Backend backend, std::uint64_t locality_window) {
    std::uint64_t window_blocks = block_count;
    if (locality_window != 0 && locality_window < block_count)
      window_blocks = (locality_window + kSlotsPerBlock - 1) / kSlotsPerBlock * kSlotsPerBlock;
    const std::uint64_t bytes = window_count(window_blocks) * sizeof(WindowPlan);
    if (windows.bytes() < bytes) windows = Memory(backend, bytes);
    return window_blocks;
  }
  std::uint64_t window_count(std::uint64_t window_blocks) const {
    return (block_count + window_blocks - 1) / window_blocks;
  }
  PlanCounts* class_counts(int class_index) const { return counts.as<PlanCounts>() + class_index; }
  std::uint64_t* holder_count(int class_index) const {
    return reinterpret_cast<std::uint64_t*>(counts.as<PlanCounts>() + class_count) + class_index;
  }
  std::uint32_t* class_list(int class_index) const {
    return lists.as<std::uint32_t>() + static_cast<std::uint64_t>(class_index) * block_count;
  }

  /// offsets = exclusive prefix sums of flows (stream-ordered on cuda).
  void scan_flows(const Executor& executor) {
    if (executor.backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      const auto items = static_cast<std::int64_t>(block_count);
      std::size_t bytes = 0;
      SOAHEAP_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(nullptr, bytes, flows.as<PlanFlow>(), offsets.as<PlanFlow>(),
                                                        AddFlows{}, PlanFlow{0, 0}, items, executor.stream));
      if (scan_temp.bytes() < bytes) scan_temp = Memory(Backend::cuda, bytes);  // sized in ensure(); a guard
      SOAHEAP_CUDA_CHECK(cub::DeviceScan::ExclusiveScan(scan_temp.get(), bytes, flows.as<PlanFlow>(),
                                                        offsets.as<PlanFlow>(), AddFlows{}, PlanFlow{0, 0}, items,
                                                        executor.stream));
#endif
    } else {
      const PlanFlow* in = flows.as<PlanFlow>();
      PlanFlow* out = offsets.as<PlanFlow>();
      PlanFlow sum{0, 0};
      for (std::uint64_t block = 0; block < block_count; ++block) {
        out[block] = sum;
        sum = AddFlows{}(sum, in[block]);
      }
    }
  }
};

/// Milliseconds each phase timer has accumulated so far (waits for recorded events).
inline void read_phase_totals(PlanScratch& scratch, const Executor& executor, double (&ms)[kPlanPhaseCount]) {
  for (int phase = 0; phase < kPlanPhaseCount; ++phase) ms[phase] = scratch.timers[phase].seconds(executor) * 1e3;
}

/// Enqueues the plan of concrete class C (counters in scratch.class_counts(C)).
template <class C, class... Classes>
void enqueue_class_plan(Heap<Classes...>& heap, PlanScratch& scratch, const DefragOptions& options) {
  using HeapType = Heap<Classes...>;
  using View = ::soaheap::detail::internals_t<HeapType>;
  constexpr int kClass = HeapType::template class_id<C>;
  constexpr int kField = in_place_forwarding_field_v<View, C>;
  const Executor& executor = heap.executor();
  const std::uint64_t blocks = heap.block_count();

  CompactionPlan<View> plan;
  plan.view = ::soaheap::detail::internals(heap);
  plan.counts = scratch.class_counts(kClass);
  plan.flows = scratch.flows.template as<PlanFlow>();
  plan.offsets = scratch.offsets.template as<PlanFlow>();
  plan.frozen = scratch.frozen.template as<std::uint64_t>();
  plan.class_blocks = scratch.class_list(kClass);
  plan.donor_bits = scratch.donor_bits.template as<std::uint64_t>();
  plan.partial_bits = plan.donor_bits + PlanScratch::donor_words(blocks);
  plan.window_blocks = scratch.prepare_windows(heap.backend(), options.locality_window);
  plan.windows = scratch.windows.template as<WindowPlan>();
  const std::uint64_t window_count = scratch.window_count(plan.window_blocks);
  plan.class_index = kClass;
  plan.capacity = HeapType::template capacity<C>;
  plan.minimum = options.target == DefragTarget::minimum;
  plan.retained = options.retained_candidates;
  plan.min_sources = options.min_compactions < 1 ? 1 : options.min_compactions;
  std::uint64_t* working = &plan.counts->working_blocks;

  scratch.timers[kPlanPhaseScan].start(executor);
  executor.launch(window_count * sizeof(WindowPlan) / sizeof(std::uint64_t),
                  ZeroWordsKernel{reinterpret_cast<std::uint64_t*>(plan.windows)});
  executor.launch(blocks, PlanSurveyKernel<View>{plan});
  executor.launch(window_count, PlanDecisionKernel<View>{plan});
  executor.launch(2 * PlanScratch::donor_words(blocks), ZeroWordsKernel{plan.donor_bits});  // and partial_bits
  executor.launch(blocks, PlanRolesKernel<View>{plan});
  scratch.scan_flows(executor);
  scratch.timers[kPlanPhaseScan].stop(executor);

  scratch.timers[kPlanPhaseCopy].start(executor);
  executor.launch_counted(&plan.counts->moved, 1, blocks * kSlotsPerBlock, LaunchHint{}, PlanCopyKernel<View, C, kField>{plan});
  scratch.timers[kPlanPhaseCopy].stop(executor);

  // One scan of the fields that can point to a C, in every class that has them.
  scratch.timers[kPlanPhaseRewrite].start(executor);
  const bool records = options.strategy == RewriteStrategy::records || kField < 0;
  auto rewrite_holder = [&](auto holder_tag) {
    using U = tag_type_t<decltype(holder_tag)>;
    if constexpr (!U::kAbstract && can_hold_pointer_to_v<U, C>) {
      constexpr int kHolder = HeapType::template class_id<U>;
      const std::uint32_t* ids = plan.class_blocks;
      const std::uint64_t* count = working;
      if constexpr (kHolder != kClass) {
        // Listed after the decision: nothing is listed (and scanned) when nothing moved.
        ids = scratch.class_list(kHolder);
        count = scratch.holder_count(kHolder);
        executor.launch(1, ZeroWordsKernel{scratch.holder_count(kHolder)});  // an earlier class may have listed it
        executor.launch(blocks, ListClassBlocksKernel<View>{plan.view, kHolder, scratch.class_list(kHolder),
                                                                      scratch.holder_count(kHolder), working});
      }
      auto scan = [&](auto relocation) {
        using Kernel = RewritePointersKernel<View, U, C, decltype(relocation)>;
        executor.launch_counted(count, Kernel::thread_count(1), Kernel::thread_count(blocks), LaunchHint{},
                                Kernel{plan.view, ids, relocation});
      };
      if (records) {
        scan(PlanRelocation<View, C, -1>{plan});
      } else {
        scan(PlanRelocation<View, C, kField>{plan});
      }
    }
  };
  (rewrite_holder(typename View::template type_tag<Classes>{}), ...);
  scratch.timers[kPlanPhaseRewrite].stop(executor);

  scratch.timers[kPlanPhaseState].start(executor);
  executor.launch_counted(working, 1, blocks, LaunchHint{}, PlanStateKernel<View>{plan});
  executor.launch_counted(&plan.counts->listed, 1, blocks, LaunchHint{}, PlanAfterKernel<View>{plan});
  scratch.timers[kPlanPhaseState].stop(executor);
}

/// Calls f(type_tag<C>) for every class a defragmentation of T with @p options covers: the concrete
/// subclasses of T (T included when concrete), or T alone when options.subclasses is false.
template <class T, class View, class Function>
void for_each_covered_class(const DefragOptions& options, Function&& f) {
  View::template for_each_concrete_subclass<T>([&](auto tag) {
    if (options.subclasses || std::is_same_v<tag_type_t<decltype(tag)>, T>) f(tag);
  });
}

/// Defragments every concrete subclass of T with the plan strategy and fills @p result (the caller
/// holds the heap's operation guard and has validated the options).
template <class T, class... Classes>
void compact_with_plan(Heap<Classes...>& heap, const DefragOptions& options, DefragResult& result) {
  using HeapType = Heap<Classes...>;
  using View = ::soaheap::detail::internals_t<HeapType>;
  PlanScratch& scratch = detail::InternalsAccess::attachment<PlanScratch>(heap);
  scratch.ensure(heap.backend(), heap.block_count(), HeapType::kClassCount);
  const Executor& executor = heap.executor();
  double before[kPlanPhaseCount];
  read_phase_totals(scratch, executor, before);

  const std::uint64_t count_words = scratch.counts.bytes() / sizeof(std::uint64_t);
  executor.launch(count_words, ZeroWordsKernel{scratch.counts.template as<std::uint64_t>()});
  for_each_covered_class<T, View>(
      options, [&](auto tag) { enqueue_class_plan<tag_type_t<decltype(tag)>>(heap, scratch, options); });
  // The one read of the run: waits for every kernel above.
  scratch.counts.copy_to_host(scratch.host_counts.data(), 0, scratch.host_counts.size() * sizeof(PlanCounts));
  heap.throw_recorded_error();

  double after[kPlanPhaseCount];
  read_phase_totals(scratch, executor, after);
  result.times.scan_ms += after[kPlanPhaseScan] - before[kPlanPhaseScan];
  result.times.copy_ms += after[kPlanPhaseCopy] - before[kPlanPhaseCopy];
  result.times.rewrite_ms += after[kPlanPhaseRewrite] - before[kPlanPhaseRewrite];
  result.times.state_ms += after[kPlanPhaseState] - before[kPlanPhaseState];

  double unused_before = 0, unused_after = 0;  // in blocks' worth of slots
  for_each_covered_class<T, View>(options, [&](auto tag) {
    using C = tag_type_t<decltype(tag)>;
    const PlanCounts& counts = scratch.host_counts[HeapType::template class_id<C>];
    const auto capacity = static_cast<std::uint64_t>(HeapType::template capacity<C>);
    if (counts.moved > 0 || counts.sources > 0) ++result.passes;
    result.blocks_freed += counts.sources;
    result.objects_moved += counts.moved;
    result.bytes_moved += counts.moved * object_size_v<C>;
    result.candidates_before += counts.candidates_before;
    result.candidates_after += counts.candidates_after;
    result.blocks_before += counts.listed;
    result.blocks_after += counts.allocated_after;
    result.live_objects += counts.used_before;
    result.minimum_blocks += (counts.used_before + capacity - 1) / capacity;
    unused_before += static_cast<double>(counts.listed * capacity - counts.used_before) / static_cast<double>(capacity);
    unused_after +=
        static_cast<double>(counts.allocated_after * capacity - counts.used_after) / static_cast<double>(capacity);
    log::debug("defrag ", C::kName, " plan: ", counts.members, " members, ", counts.sources, " sources, ", counts.moved,
               " objects moved, ", counts.listed, " -> ", counts.allocated_after, " blocks");
  });
  // F over the covered classes, weighted by their allocated blocks as in HeapStats::fragmentation.
  result.fragmentation_before = result.blocks_before == 0 ? 0.0 : unused_before / static_cast<double>(result.blocks_before);
  result.fragmentation_after = result.blocks_after == 0 ? 0.0 : unused_after / static_cast<double>(result.blocks_after);
}

}  // namespace soaheap::detail
