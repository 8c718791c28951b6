#pragma once
/// @file detail/candidate_scan.cuh
/// @brief Pass step 0: freeze the bitmaps of the chosen source and target blocks into the pass plan
///        (R itself comes from Heap::enumerate_blocks over the defrag[T] bitmap, CUB on cuda).

#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>

#include <cstdint>

namespace soaheap::detail {

/// One thread per source block: records its allocation bitmap and its targets' free slots, and
/// counts the objects the pass will move.
template <class View>
struct PlanPassKernel {
  View view;
  PassPlan plan;
  std::uint64_t* moved_objects;  ///< one counter
  SOAHEAP_HD void operator()(std::uint64_t source) const {
    const std::uint64_t full = View::full_mask(plan.class_index);
    const std::uint64_t objects = atomic_load(&view.headers[plan.source_block(source)].allocation) & full;
    plan.source_bitmaps[source] = objects;
    for (int k = 0; k < plan.factor; ++k)
      plan.target_free_slots(source, k) = ~atomic_load(&view.headers[plan.target_block(source, k)].allocation) & full;
    atomic_fetch_add(moved_objects, static_cast<std::uint64_t>(popcount(objects)));
  }
};

}  // namespace soaheap::detail
