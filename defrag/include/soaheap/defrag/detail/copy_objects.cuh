#pragma once
/// @file detail/copy_objects.cuh
/// @brief Pass step 1 (paper Alg. 1): copy every object of every source block into its target slot,
///        field by field over the SOA arrays (core/detail/field_copy.cuh), and mark the target
///        slots allocated.

#include <soaheap/core/detail/field_copy.cuh>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>

#include <cstdint>

namespace soaheap::detail {

/// kThreadsPerSourceBlock consecutive threads per source block; thread s moves the s-th object of
/// its source (if there is one) to the s-th free slot across the source's targets. Every target
/// belongs to exactly one source and every slot to one thread, so no two threads write the same
/// data; the target allocation bits are set with atomics because slots share a 64-bit word.
template <class View, class C>
struct CopyObjectsKernel {
  View view;
  PassPlan plan;

  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t source = tid / kThreadsPerSourceBlock;
    const int rank = static_cast<int>(tid % kThreadsPerSourceBlock);
    const std::uint64_t objects = plan.source_bitmaps[source];
    if (rank >= popcount(objects)) return;
    const int source_slot = select_set_bit(objects, rank);
    const Destination destination = plan.destination_of(source, rank);
    if (destination.block == Destination::kNoDestination) return;  // unreachable for a valid plan
    ObjectCopy<View, C>::copy(view.data_address(plan.source_block(source)), source_slot,
                              view.data_address(destination.block), destination.slot);
    atomic_fetch_or(&view.headers[destination.block].allocation, std::uint64_t{1} << destination.slot);
  }
};

}  // namespace soaheap::detail
