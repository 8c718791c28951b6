#pragma once
/// @file untyped_memory.cuh
/// @brief `soaheap::malloc` / `soaheap::free`: untyped memory of any size in the same heap as the
///        managed objects (the low layer of the KMA thesis's two-layer design).
///
/// Requests that fit a chunk smaller than a block share blocks by size class, larger ones take runs
/// of contiguous blocks (detail/untyped_allocator.cuh). Untyped blocks carry header class ids that no managed class has,
/// and bitmaps of their own, so enumeration, statistics of classes and defragmentation (which read
/// only managed classes' bitmaps) never see, move or change them.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/core/untyped_layout.cuh>

#include <cstdint>

namespace soaheap {
namespace detail {
template <class View>
struct Untyped;
}  // namespace detail

/// @brief Allocates @p bytes of untyped memory from @p heap, aligned to 16 bytes; callable in
/// kernels (cuda) and host-backend threads. Requests that fit a chunk smaller than a block share
/// blocks by size class; larger ones take contiguous blocks. Where the request's class has no room,
/// it gets a chunk of a larger class, at most twice its own, before it fails.
/// @return the memory, or nullptr when @p bytes is 0 or the heap has no room (then an
///         out_of_memory naming the size is thrown by the next host call on the heap)
/// @param heap a HeapView (`heap.view()`)
template <class... Classes>
SOAHEAP_HD SOAHEAP_FORCE_INLINE void* malloc(const HeapView<Classes...>& heap, std::uint64_t bytes) {
  return detail::Untyped<detail::HeapInternals<Classes...>>::allocate(detail::internals(heap), bytes, detail::kUntypedAlignment);
}

/// @brief malloc with an @p alignment (a power of two up to 128 bytes).
/// @return nullptr for any other alignment, recording an error that the next host call throws
template <class... Classes>
SOAHEAP_HD SOAHEAP_FORCE_INLINE void* malloc_aligned(const HeapView<Classes...>& heap, std::uint64_t bytes, std::uint64_t alignment) {
  return detail::Untyped<detail::HeapInternals<Classes...>>::allocate(detail::internals(heap), bytes, alignment);
}

/// @brief Frees memory that soaheap::malloc of the same heap returned (nullptr is ignored). A
/// double free or a pointer malloc did not return is recorded and thrown by the next host call;
/// the checked mode (SOAHEAP_CHECKED) also cross-checks the block's bitmap.
template <class... Classes>
SOAHEAP_HD void free(const HeapView<Classes...>& heap, void* pointer) {
  detail::Untyped<detail::HeapInternals<Classes...>>::deallocate(detail::internals(heap), pointer);
}

}  // namespace soaheap

// The algorithms, and what the host reports of them.
#include <soaheap/core/detail/untyped_allocator.cuh>
#include <soaheap/core/detail/untyped_reports.cuh>
