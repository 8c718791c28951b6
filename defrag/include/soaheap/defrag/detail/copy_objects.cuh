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

/// Copies one moved object to its target slot. Every target belongs to exactly one source and every
/// slot to one thread, so no two threads write the same data; the target allocation bits are set
/// with atomics because slots share a 64-bit word.
template <class View, class C>
struct CopyObjectStep {
  SOAHEAP_HD static void apply(const View& view, const PassPlan& plan, const Move& move) {
    ObjectCopy<View, C>::copy(view.data_address(plan.source_block(move.source)), move.source_slot,
                              view.data_address(move.destination.block), move.destination.slot);
    atomic_fetch_or(&view.headers[move.destination.block].allocation,
                    std::uint64_t{1} << move.destination.slot);
  }
};

/// Thread s of a source moves the s-th object of the source to the s-th free slot across its targets.
template <class View, class C>
using CopyObjectsKernel = PassMoveKernel<View, CopyObjectStep<View, C>>;

}  // namespace soaheap::detail
