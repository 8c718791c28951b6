#pragma once
/// @file detail/forwarding.cuh
/// @brief Pass step 2 (paper Alg. 2): leave a forwarding pointer (the new tagged object pointer) for
///        every moved object in its source block, which no longer needs its data.
///
/// The forwarding pointers of a block are an array of N_T 64-bit words at the start of its data
/// segment, overlapping the SOA arrays. That is why this is a kernel of its own: written during the
/// copy, a forwarding pointer could overwrite field data another thread has yet to read.

#include <soaheap/core/heap_view.cuh>
#include <soaheap/defrag/detail/pass_plan.cuh>

#include <cstdint>

namespace soaheap::detail {

/// True when N_C forwarding pointers fit into a data segment. They do unless objects of C are
/// smaller than 8 bytes; such classes fall back to the records strategy.
template <class View, class C>
inline constexpr bool forwarding_pointers_fit_v =
    static_cast<std::uint64_t>(View::Layout::template capacity<C>) * sizeof(std::uint64_t) <= View::Layout::kDataBytes;

/// The forwarding-pointer array of (source) block @p block.
template <class View>
SOAHEAP_HD inline std::uint64_t* forwarding_pointers(const View& view, std::uint64_t block) {
  return reinterpret_cast<std::uint64_t*>(view.data_address(block));
}

/// Same thread layout as CopyObjectsKernel; recomputes each destination from the frozen plan.
template <class View, class C>
struct StoreForwardingPointersKernel {
  View view;
  PassPlan plan;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t source = tid / kThreadsPerSourceBlock;
    const int rank = static_cast<int>(tid % kThreadsPerSourceBlock);
    const std::uint64_t objects = plan.source_bitmaps[source];
    if (rank >= popcount(objects)) return;
    const Destination destination = plan.destination_of(source, rank);
    if (destination.block == Destination::kNoDestination) return;
    forwarding_pointers(view, plan.source_block(source))[select_set_bit(objects, rank)] =
        view.make_pointer_bits(destination.block, destination.slot, plan.class_index);
  }
};

}  // namespace soaheap::detail
