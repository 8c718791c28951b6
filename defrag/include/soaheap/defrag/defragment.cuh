#pragma once
/// @file defragment.cuh
/// @brief `soaheap::defragment<T>(heap, options)`: in-place, parallel
///        compaction of the blocks of T (and of each concrete subclass of T), after CompactGpu
///        (Springer & Masuhara, ISMM 2019).
///
/// Two strategies (DefragOptions::compaction). The default, `plan`, computes on the device in one
/// go which blocks give objects away and where every moved object goes, then copies (leaving
/// forwarding pointers), rewrites pointers in one scan and updates block states; nothing waits for
/// the GPU until the final counts are read (detail/compaction_plan.cuh, detail/plan_run.cuh).
///
/// `passes` is the paper's algorithm. One pass over class C, each step a kernel run between the application's kernels:
///  0. scan:    R = sorted ids of the defrag[C] candidates; B = floor(r/(n+1)) sources R[0..B), each
///              with the n targets R[i + k·B]; their bitmaps are frozen into a pass plan.
///  1. copy:    64 threads per source; the s-th object goes to the s-th free slot across its targets.
///  2. forward: each source slot's first 8 bytes·N area receives the moved object's new pointer
///              (skipped by the records strategy, which recomputes it from the plan instead).
///  3. rewrite: every field that reflection says can point to a C, in every live object of every
///              class, is redirected when it points into a source (candidate with id < R[B]).
///  4. state:   sources become free, targets get active/defrag from their new fill level.
/// Passes repeat until at most k1 candidates remain or a pass would have fewer than
/// min_compactions sources. With k1 = 0 every block of C is then more than n/(n+1) full except for at
/// most n leftover candidates, so the fragmentation of C is at most 1/(n+1) apart from those.
///
/// Pointers to moved objects held outside the heap (host variables, kernel arguments, non-reflected
/// memory) are not rewritten; keep them only within one stretch between defragmentations.

#include <soaheap/core/heap.cuh>
#include <soaheap/defrag/defrag_options.hpp>
#include <soaheap/defrag/detail/candidate_scan.cuh>
#include <soaheap/defrag/detail/copy_objects.cuh>
#include <soaheap/defrag/detail/forwarding.cuh>
#include <soaheap/defrag/detail/ordered_run.cuh>
#include <soaheap/defrag/order.cuh>
#include <soaheap/base/log.hpp>
#include <soaheap/defrag/detail/pass_plan.cuh>
#include <soaheap/defrag/detail/plan_run.cuh>
#include <soaheap/defrag/detail/rewrite_pointers.cuh>
#include <soaheap/defrag/detail/state_update.cuh>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace soaheap {

/// @brief Merges the defragmentation candidates of T (each concrete subclass of T) pass by pass.
/// @tparam T a managed class of the heap; an abstract base covers all its concrete subclasses
/// @param options factor n (0: keep the class's current factor), k1, minimum sources per pass, rewrite strategy
/// @return what was done, summed over passes and subclasses
/// @throw invalid_argument when options.factor is outside 1..N_C-1 for a covered class C, or k1 /
///        min_compactions are negative (nothing has changed then)
/// @throw usage_error while another operation on the heap is in flight
template <class T, class... Classes>
DefragResult defragment(Heap<Classes...>& heap, const DefragOptions& options = {});

/// @brief Ordered compaction: the objects of T (each concrete subclass of T on its own) end in
/// ceil(live/N) blocks, in ascending order of @p order's key (stable for equal keys), each object
/// moved once and every pointer to them rewritten in one scan (detail/ordered_run.cuh).
/// @param options options.subclasses and options.factor (the n that the blocks' states follow
///        afterwards) apply; the strategy, target and k1 do not (an ordered run always reaches the
///        fewest blocks); locality windows and the passes strategy are refused
/// @param order e.g. `soaheap::order_by_pointer_field<&Agent::position>()` (order.cuh)
/// @throw out_of_memory when the heap lacks the ceil(live/N) free blocks the objects are gathered
///        into (nothing has changed then; classes covered before it are already ordered)
/// @throw invalid_argument for options an ordered run cannot honour, as defragment() above
template <class T, class Order, class... Classes>
DefragResult defragment(Heap<Classes...>& heap, const DefragOptions& options, const Order& order);

namespace detail {

/// Milliseconds since @p start, and restarts it.
inline double lap_ms(std::chrono::steady_clock::time_point& start) {
  const auto now = std::chrono::steady_clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - start).count();
  start = now;
  return ms;
}

/// Occupancy of the blocks of all concrete subclasses of T (by heap.stats(); the passes strategy).
struct CoveredOccupancy {
  double fragmentation = 0;  ///< F of the ISMM paper
  std::uint64_t candidates = 0;
  std::uint64_t blocks = 0;
  std::uint64_t live = 0;
  std::uint64_t minimum_blocks = 0;
};
template <class T, class HeapType>
CoveredOccupancy measure_occupancy(const HeapType& heap, const DefragOptions& options) {
  const HeapStats stats = heap.stats();
  double free_fraction_sum = 0;
  CoveredOccupancy result;
  for_each_covered_class<T, ::soaheap::detail::internals_t<HeapType>>(options, [&](auto tag) {
    using C = tag_type_t<decltype(tag)>;
    const ClassStats& entry = stats.classes[HeapType::template class_id<C>];
    free_fraction_sum += entry.fragmentation() * static_cast<double>(entry.allocated_blocks);
    result.blocks += entry.allocated_blocks;
    result.candidates += entry.candidate_blocks;
    result.live += entry.used_slots;
    const auto capacity = static_cast<std::uint64_t>(entry.capacity);
    result.minimum_blocks += (entry.used_slots + capacity - 1) / capacity;
  });
  result.fragmentation = result.blocks == 0 ? 0.0 : free_fraction_sum / static_cast<double>(result.blocks);
  return result;
}

/// Runs the passes over concrete class C (the caller holds the heap's operation guard).
template <class C, class... Classes>
void defragment_class(Heap<Classes...>& heap, const DefragOptions& options, DefragResult& result) {
  using HeapType = Heap<Classes...>;
  using View = ::soaheap::detail::internals_t<HeapType>;
  constexpr int kClass = HeapType::template class_id<C>;
  constexpr int kCapacity = HeapType::template capacity<C>;
  const int n = heap.defrag_factor(kClass);
  const long long retained = options.retained_candidates;
  const long long min_sources = options.min_compactions < 1 ? 1 : options.min_compactions;
  const bool records = options.strategy == RewriteStrategy::records || !forwarding_pointers_fit_v<View, C>;
  const View view = ::soaheap::detail::internals(heap);
  const Executor& executor = heap.executor();

  // Blocks of the other classes do not change while C is compacted, so their lists are taken once
  // per run; C's own blocks (sources leave, targets fill up) are listed again in every pass.
  std::vector<detail::InternalsAccess::BlockList<HeapType>> holder_blocks(HeapType::kClassCount);
  std::vector<bool> holder_listed(HeapType::kClassCount, false);
  auto blocks_of_holder = [&](int holder_class) -> const detail::InternalsAccess::BlockList<HeapType>& {
    if (holder_class == kClass || !holder_listed[holder_class]) {
      holder_blocks[holder_class] = detail::InternalsAccess::enumerate_blocks(heap, 1 + holder_class);
      holder_listed[holder_class] = true;
    }
    return holder_blocks[holder_class];
  };

  for (;;) {
    auto clock = std::chrono::steady_clock::now();
    const auto candidates = detail::InternalsAccess::enumerate_blocks(heap, 1 + 2 * HeapType::kClassCount + kClass);
    const std::uint64_t r = candidates.count;
    const std::uint64_t sources = r / static_cast<std::uint64_t>(n + 1);
    if (static_cast<long long>(r) <= retained || sources == 0 || static_cast<long long>(sources) < min_sources) {
      result.times.scan_ms += lap_ms(clock);
      break;
    }
    PassPlan plan;
    plan.candidates = candidates.ids();
    plan.source_count = sources;
    plan.factor = n;
    plan.class_index = kClass;
    plan.first_target = candidates.id_at(sources);
    // Plan storage: source bitmaps [B], target free masks [n·B], the moved-object counter.
    Memory plan_memory(heap.backend(), (sources * static_cast<std::uint64_t>(n + 1) + 1) * sizeof(std::uint64_t));
    plan.source_bitmaps = plan_memory.as<std::uint64_t>();
    plan.target_free = plan.source_bitmaps + sources;
    std::uint64_t* moved_counter = plan.target_free + sources * static_cast<std::uint64_t>(n);
    const std::uint64_t zero = 0;
    plan_memory.copy_from_host(sources * static_cast<std::uint64_t>(n + 1) * sizeof(std::uint64_t), &zero, sizeof(zero));
    executor.run(sources, PlanPassKernel<View>{view, plan, moved_counter});
    std::uint64_t moved = 0;
    plan_memory.copy_to_host(&moved, sources * static_cast<std::uint64_t>(n + 1) * sizeof(std::uint64_t), sizeof(moved));
    const double scan_ms = lap_ms(clock);

    executor.run(sources * kThreadsPerSourceBlock, CopyObjectsKernel<View, C>{view, plan});
    const double copy_ms = lap_ms(clock);

    if (!records) executor.run(sources * kThreadsPerSourceBlock, StoreForwardingPointersKernel<View, C>{view, plan});
    const double forward_ms = lap_ms(clock);

    auto rewrite_holder = [&](auto holder_tag) {
      using U = tag_type_t<decltype(holder_tag)>;
      if constexpr (!U::kAbstract && can_hold_pointer_to_v<U, C>) {
        const detail::InternalsAccess::BlockList<HeapType>& holders = blocks_of_holder(HeapType::template class_id<U>);
        if (records) {
          using Relocation = PassRelocation<View, RecordLookup<View>>;
          using Kernel = RewritePointersKernel<View, U, C, Relocation>;
          executor.run(Kernel::thread_count(holders.count),
                       Kernel{view, holders.ids(), Relocation{view, plan, RecordLookup<View>{view}}});
        } else {
          using Relocation = PassRelocation<View, ForwardingPointerLookup<View>>;
          using Kernel = RewritePointersKernel<View, U, C, Relocation>;
          executor.run(Kernel::thread_count(holders.count),
                       Kernel{view, holders.ids(), Relocation{view, plan, ForwardingPointerLookup<View>{view}}});
        }
      }
    };
    (rewrite_holder(typename View::template type_tag<Classes>{}), ...);
    const double rewrite_ms = lap_ms(clock);

    executor.run(sources, UpdateBlockStatesKernel<View>{view, plan});
    const double state_ms = lap_ms(clock);

    ++result.passes;
    result.blocks_freed += sources;
    result.objects_moved += moved;
    result.bytes_moved += moved * object_size_v<C>;
    result.times.scan_ms += scan_ms;
    result.times.copy_ms += copy_ms;
    result.times.forward_ms += forward_ms;
    result.times.rewrite_ms += rewrite_ms;
    result.times.state_ms += state_ms;
    log::debug("defrag ", C::kName, " pass: ", r, " candidates, ", sources, " sources (n=", n, ", capacity ", kCapacity,
               "), ", moved, " objects moved, ", records ? "records" : "forwarding pointers", " rewrite; scan ",
               log::fixed(scan_ms), " ms, copy ", log::fixed(copy_ms), " ms, forward ", log::fixed(forward_ms),
               " ms, rewrite ", log::fixed(rewrite_ms), " ms, state ", log::fixed(state_ms), " ms");
  }
}

/// Checks @p options for a defragmentation of T and applies options.factor; throws before anything
/// changed.
template <class T, class... Classes>
void prepare_defragment(Heap<Classes...>& heap, const DefragOptions& options) {
  using HeapType = Heap<Classes...>;
  using View = ::soaheap::detail::internals_t<HeapType>;
  static_assert(HeapType::template class_id<T> >= 0,
                "soaheap::defragment: this class is not one of the heap's classes");
  detail::InternalsAccess::require_idle(heap, "defrag");
  const std::string name = T::kName;
  if (options.retained_candidates < 0)
    throw invalid_argument("soaheap: defrag of " + name + ": retained candidates k1=" +
                           std::to_string(options.retained_candidates) + " is negative");
  if (options.min_compactions < 0)
    throw invalid_argument("soaheap: defrag of " + name + ": min_compactions=" + std::to_string(options.min_compactions) +
                           " is negative");
  if (options.target == DefragTarget::minimum && options.compaction != CompactionStrategy::plan)
    throw invalid_argument("soaheap: defrag of " + name + ": target=minimum needs compaction=plan (the passes "
                           "strategy only guarantees the 1/(n+1) bound)");
  if (!options.subclasses && T::kAbstract)
    throw invalid_argument("soaheap: defrag of " + name + ": subclasses=false needs a concrete class (" + name +
                           " is abstract, so it alone has no objects)");
  if (options.locality_window != 0 && options.compaction != CompactionStrategy::plan)
    throw invalid_argument("soaheap: defrag of " + name + ": locality_window=" + std::to_string(options.locality_window) +
                           " needs compaction=plan");
  if (options.factor != 0) {
    // Check every covered class before changing any, so a bad n leaves the heap as it was.
    for_each_covered_class<T, View>(options, [&](auto tag) {
      using C = tag_type_t<decltype(tag)>;
      constexpr int kCapacity = HeapType::template capacity<C>;
      if (options.factor < 1 || options.factor > kCapacity - 1)
        throw invalid_argument("soaheap: defrag of " + name + ": defragmentation factor n=" +
                               std::to_string(options.factor) + " is out of range for class " + C::kName +
                               ": n must be in 1.." + std::to_string(kCapacity - 1) + " (its block capacity is " +
                               std::to_string(kCapacity) + ")");
    });
    for_each_covered_class<T, View>(options, [&](auto tag) {
      constexpr int kClass = HeapType::template class_id<tag_type_t<decltype(tag)>>;
      // Rebuilding the candidate bitmap waits for the GPU: only when n changes.
      if (heap.defrag_factor(kClass) != options.factor) heap.set_defrag_factor(kClass, options.factor);
    });
  }
}

/// The one info line of a run.
inline void log_defrag_result(const DefragResult& result, const char* how) {
  log::info("defrag ", result.class_name, " (", how, "): ", result.passes, " passes, ", result.blocks_freed,
            " blocks freed, ", result.objects_moved, " objects moved (", result.bytes_moved, " bytes), candidates ",
            result.candidates_before, " -> ", result.candidates_after, ", fragmentation ",
            log::fixed(result.fragmentation_before, 4), " -> ", log::fixed(result.fragmentation_after, 4), "; order ",
            log::fixed(result.times.order_ms), " ms, scan ", log::fixed(result.times.scan_ms), " ms, copy ",
            log::fixed(result.times.copy_ms), " ms, forward ", log::fixed(result.times.forward_ms), " ms, rewrite ",
            log::fixed(result.times.rewrite_ms), " ms, state ", log::fixed(result.times.state_ms), " ms, total ",
            log::fixed(result.times.total_ms()), " ms");
}

}  // namespace detail

template <class T, class... Classes>
DefragResult defragment(Heap<Classes...>& heap, const DefragOptions& options) {
  using HeapType = Heap<Classes...>;
  using View = ::soaheap::detail::internals_t<HeapType>;
  detail::prepare_defragment<T>(heap, options);
  const std::string name = T::kName;
  if (options.first_block != 0)
    throw invalid_argument("soaheap: defrag of " + name + ": first_block=" + std::to_string(options.first_block) +
                           " applies to ordered compaction only (give an order)");
  const detail::InternalsAccess::OperationGuard<HeapType> guard(heap, "defrag");
  DefragResult result;
  result.class_name = name;
  if (options.compaction == CompactionStrategy::plan) {
    detail::compact_with_plan<T>(heap, options, result);
  } else {
    const detail::CoveredOccupancy before = detail::measure_occupancy<T>(heap, options);
    detail::for_each_covered_class<T, View>(
        options, [&](auto tag) { detail::defragment_class<detail::tag_type_t<decltype(tag)>>(heap, options, result); });
    const detail::CoveredOccupancy after = detail::measure_occupancy<T>(heap, options);
    result.fragmentation_before = before.fragmentation;
    result.candidates_before = before.candidates;
    result.blocks_before = before.blocks;
    result.live_objects = before.live;
    result.minimum_blocks = before.minimum_blocks;
    result.fragmentation_after = after.fragmentation;
    result.candidates_after = after.candidates;
    result.blocks_after = after.blocks;
  }

  detail::log_defrag_result(result, to_string(options.compaction));
  return result;
}

template <class T, class Order, class... Classes>
DefragResult defragment(Heap<Classes...>& heap, const DefragOptions& options, const Order& order) {
  using HeapType = Heap<Classes...>;
  using View = ::soaheap::detail::internals_t<HeapType>;
  const std::string name = T::kName;
  if (options.compaction != CompactionStrategy::plan)
    throw invalid_argument("soaheap: ordered defrag of " + name + ": compaction=passes cannot order objects; use plan");
  if (options.locality_window != 0)
    throw invalid_argument("soaheap: ordered defrag of " + name + ": locality_window=" +
                           std::to_string(options.locality_window) + " contradicts an order (objects go where their key says)");
  detail::prepare_defragment<T>(heap, options);

  const detail::InternalsAccess::OperationGuard<HeapType> guard(heap, "defrag");
  DefragResult result;
  result.class_name = name;
  result.ordered = true;
  double unused_before = 0, unused_after = 0;  // in blocks' worth of slots
  detail::for_each_covered_class<T, View>(options, [&](auto tag) {
    detail::compact_class_in_order<detail::tag_type_t<decltype(tag)>>(heap, order, options.map_fresh_blocks,
                                                                      options.first_block, result, unused_before,
                                                                      unused_after);
  });
  result.fragmentation_before = result.blocks_before == 0 ? 0.0 : unused_before / static_cast<double>(result.blocks_before);
  result.fragmentation_after = result.blocks_after == 0 ? 0.0 : unused_after / static_cast<double>(result.blocks_after);
  detail::log_defrag_result(result, "ordered");
  return result;
}

}  // namespace soaheap
