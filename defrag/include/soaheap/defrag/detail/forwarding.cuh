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

/// Leaves the forwarding pointer of one moved object in its source block.
template <class View>
struct StoreForwardingPointerStep {
  SOAHEAP_HD static void apply(const View& view, const PassPlan& plan, const Move& move) {
    forwarding_pointers(view, plan.source_block(move.source))[move.source_slot] =
        view.make_pointer_bits(move.destination.block, move.destination.slot, plan.class_index);
  }
};

/// Same threads as CopyObjectsKernel; recomputes each destination from the frozen plan.
template <class View, class C>
using StoreForwardingPointersKernel = PassMoveKernel<View, StoreForwardingPointerStep<View>>;

}  // namespace soaheap::detail
