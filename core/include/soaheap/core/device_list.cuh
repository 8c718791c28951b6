#pragma once
/// @file device_list.cuh
/// @brief `soaheap::DeviceList<T, Heap>`: a list that kernels append to, stored in untyped memory of
///        a heap (the ArrayList of the KMA thesis's upper layer).
///
/// Storage is a directory of chunks whose sizes double (chunk c holds first·2^c elements), so an
/// index never moves while the list grows and finding an element is one bit scan. A chunk is
/// allocated by the first thread that needs it: it claims the directory entry with one CAS and
/// calls soaheap::malloc; threads that need the same chunk meanwhile poll the entry a bounded
/// number of times. Appends of a warp (or of a whole thread block) are aggregated into one
/// reservation of consecutive indices.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/core/untyped_memory.cuh>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if SOAHEAP_DEVICE_CODE || defined(__CUDACC__)
#include <cooperative_groups.h>
#include <cooperative_groups/scan.h>
#endif

namespace soaheap {
namespace detail {

/// Directory entries: chunk c holds first·2^c elements, so 40 chunks hold first·(2^40 - 1).
inline constexpr int kDeviceListChunks = 40;
inline constexpr std::uint64_t kChunkAbsent = 0;
inline constexpr std::uint64_t kChunkBeingAllocated = 1;
/// Polls of a directory entry that another thread is filling before giving up (its malloc is
/// bounded too, so this is only reached when that thread cannot run).
inline constexpr int kChunkWaitPolls = 1 << 22;

/// The device-side part of a DeviceList.
struct DeviceListState {
  std::uint64_t size;                       ///< indices handed out
  std::uint64_t chunks[kDeviceListChunks];  ///< kChunkAbsent, kChunkBeingAllocated, or the chunk's address
};

}  // namespace detail

/// @brief Kernel/host-thread handle of a DeviceList; copy it into kernels.
template <class T, class HeapViewType>
class DeviceListView {
 public:
  /// Returned by push_back / append when the heap had no room for the list's storage.
  static constexpr std::uint64_t kNoIndex = ~std::uint64_t{0};

  HeapViewType heap;
  detail::DeviceListState* state = nullptr;
  std::uint64_t first_chunk_elements = 0;  ///< a power of two

  /// @brief Elements appended so far (including ones whose writer has not finished yet).
  SOAHEAP_HD std::uint64_t size() const { return detail::atomic_load(&state->size); }

  /// @brief Element @p index (< size(), its appender having written it).
  SOAHEAP_HD T& operator[](std::uint64_t index) const {
    const int chunk = chunk_of(index);
    T* elements = reinterpret_cast<T*>(detail::atomic_load(&state->chunks[chunk]));
    return elements[index - chunk_begin(chunk)];
  }

  /// @brief Appends @p value; returns its index, or kNoIndex when the heap is out of memory (the
  /// error is recorded for the next host call).
  SOAHEAP_HD std::uint64_t push_back(const T& value) const {
    const std::uint64_t index = reserve(1);
    if (index != kNoIndex) (*this)[index] = value;
    return index;
  }

  /// @brief Reserves @p count consecutive elements for the calling thread: one reservation for
  /// the whole warp when all its 32 lanes call append together, one per thread otherwise (any
  /// subset of the warp may call; a partial group is not aggregated, see "Warp aggregation" in
  /// docs/architecture.md). Returns the first index, or kNoIndex on out of memory.
  SOAHEAP_HD std::uint64_t append(std::uint64_t count) const {
#if SOAHEAP_DEVICE_CODE
    if (!detail::whole_warp_converged()) return reserve(count);
    return append(cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block()), count);
#else
    return reserve(count);  // a host-backend "warp" is one thread
#endif
  }

#if defined(__CUDACC__)
  /// @brief append for the threads of @p group (a thread_block_tile, or a coalesced group the
  /// caller knows to be exactly the lanes that call here): every thread of the group calls it with
  /// its own @p count; one reservation for all.
  template <class Group>
  __device__ std::uint64_t append(const Group& group, std::uint64_t count) const {
    const std::uint64_t offset = cooperative_groups::exclusive_scan(group, count);
    const std::uint64_t total = group.shfl(offset + count, group.num_threads() - 1);
    std::uint64_t first = 0;
    if (group.thread_rank() == 0) first = reserve(total);
    first = group.shfl(first, 0);
    return first == kNoIndex ? kNoIndex : first + offset;
  }

  /// @brief append for a whole thread block: every thread of the block must call it (that is
  /// what a thread_block group means); to let only some threads take part, call append(count),
  /// which aggregates per warp without a barrier.
  __device__ std::uint64_t append(const cooperative_groups::thread_block& block, std::uint64_t count) const {
    __shared__ std::uint64_t block_total;
    __shared__ std::uint64_t block_first;
    if (block.thread_rank() == 0) block_total = 0;
    block.sync();
    const std::uint64_t offset = atomicAdd(reinterpret_cast<unsigned long long*>(&block_total), count);
    block.sync();
    if (block.thread_rank() == 0) block_first = reserve(block_total);
    block.sync();
    const std::uint64_t first = block_first;
    return first == kNoIndex ? kNoIndex : first + offset;
  }
#endif

  /// @brief Frees the storage and empties the list. Only while no other thread uses the list
  /// (DeviceList::clear runs it between kernels).
  SOAHEAP_HD void clear() const {
    for (int chunk = 0; chunk < detail::kDeviceListChunks; ++chunk) release_chunk(chunk);
    detail::atomic_store(&state->size, 0);
  }

  /// Frees directory entry @p chunk (one thread per chunk in DeviceList::clear).
  SOAHEAP_HD void release_chunk(int chunk) const {
    const std::uint64_t address = detail::atomic_load(&state->chunks[chunk]);
    if (address > detail::kChunkBeingAllocated) soaheap::free(heap, reinterpret_cast<void*>(address));
    detail::atomic_store(&state->chunks[chunk], detail::kChunkAbsent);
  }

  /// Directory entry that holds element @p index.
  SOAHEAP_HD int chunk_of(std::uint64_t index) const {
    return detail::highest_set_bit(index / first_chunk_elements + 1);
  }
  /// First element of directory entry @p chunk.
  SOAHEAP_HD std::uint64_t chunk_begin(int chunk) const {
    return first_chunk_elements * ((std::uint64_t{1} << chunk) - 1);
  }
  SOAHEAP_HD std::uint64_t chunk_elements(int chunk) const { return first_chunk_elements << chunk; }

 private:
  /// Hands out @p count consecutive indices and makes sure storage exists for all of them.
  SOAHEAP_HD std::uint64_t reserve(std::uint64_t count) const {
    if (count == 0) return size();
    const std::uint64_t first = detail::atomic_fetch_add(&state->size, count);
    const std::uint64_t last = first + count - 1;
    if (last >= chunk_begin(detail::kDeviceListChunks) || last < first) {
      detail::internals(heap).record_error(HeapErrorKind::untyped_out_of_memory, detail::kUntypedErrorClass, detail::kMaxErrorPayload);
      return kNoIndex;
    }
    for (int chunk = chunk_of(first); chunk <= chunk_of(last); ++chunk)
      if (!ensure_chunk(chunk)) return kNoIndex;
    return first;
  }

  /// True once directory entry @p chunk has storage (allocating it or waiting for whoever does).
  SOAHEAP_HD bool ensure_chunk(int chunk) const {
    std::uint64_t* entry = &state->chunks[chunk];
    for (int poll = 0; poll < detail::kChunkWaitPolls; ++poll) {
      const std::uint64_t address = detail::atomic_load(entry);
      if (address > detail::kChunkBeingAllocated) return true;
      if (address == detail::kChunkAbsent &&
          detail::atomic_cas(entry, detail::kChunkAbsent, detail::kChunkBeingAllocated) == detail::kChunkAbsent) {
        constexpr std::uint64_t kAlignment = alignof(T) > detail::kUntypedAlignment ? alignof(T) : detail::kUntypedAlignment;
        void* storage = soaheap::malloc_aligned(heap, chunk_elements(chunk) * sizeof(T), kAlignment);
        // On failure the entry becomes absent again, so that the list can grow once memory is freed.
        detail::atomic_store(entry, storage != nullptr ? reinterpret_cast<std::uint64_t>(storage) : detail::kChunkAbsent);
        return storage != nullptr;
      }
      pause();
    }
    detail::internals(heap).record_error(HeapErrorKind::untyped_out_of_memory, detail::kUntypedErrorClass, chunk_elements(chunk) * sizeof(T));
    return false;
  }

  SOAHEAP_HD static void pause() {
#if SOAHEAP_DEVICE_CODE
    __nanosleep(64);
#else
    std::this_thread::yield();
#endif
  }
};

namespace detail {
/// Frees one directory entry per thread (DeviceList::clear).
template <class ListView>
struct ClearDeviceListKernel {
  ListView list;
  SOAHEAP_HD void operator()(std::uint64_t chunk) const { list.release_chunk(static_cast<int>(chunk)); }
};
}  // namespace detail

/// @brief A list of trivially copyable @p T in untyped memory of a heap, appended to by kernels.
/// @tparam HeapType the soaheap::Heap it lives in (which must outlive it)
template <class T, class HeapType>
class DeviceList {
  static_assert(std::is_trivially_copyable_v<T>, "soaheap::DeviceList holds trivially copyable types only");
  static_assert(alignof(T) <= detail::kMaxUntypedAlignment, "soaheap::DeviceList: element alignment above 128 bytes");

 public:
  using View = DeviceListView<T, typename HeapType::View>;

  /// @param first_chunk_elements elements of the first storage chunk (each further chunk doubles)
  /// @throw invalid_argument unless it is a power of two
  explicit DeviceList(HeapType& heap, std::uint64_t first_chunk_elements = 1024)
      : heap_(heap), state_(heap.backend(), sizeof(detail::DeviceListState)), first_chunk_elements_(first_chunk_elements) {
    if (first_chunk_elements == 0 || (first_chunk_elements & (first_chunk_elements - 1)) != 0)
      throw invalid_argument("soaheap: DeviceList first_chunk_elements=" + std::to_string(first_chunk_elements) +
                             " must be a power of two");
    state_.fill_zero();
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  /// Gives the storage back to the heap.
  ~DeviceList() {
    try {
      clear();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; the heap reports it later
    }
  }

  /// @brief The handle kernels use.
  View view() const {
    View view;
    view.heap = heap_.view();
    view.state = state_.template as<detail::DeviceListState>();
    view.first_chunk_elements = first_chunk_elements_;
    return view;
  }

  /// @brief Elements appended (waits for the heap's kernels; throws what they recorded).
  std::uint64_t size() const {
    heap_.synchronize();
    std::uint64_t size = 0;
    state_.copy_to_host(&size, offsetof(detail::DeviceListState, size), sizeof(size));
    return size;
  }

  /// @brief A host copy of the elements, in index order.
  /// @throw error when an element has no storage (an append ran out of memory), or what the
  ///        heap's kernels recorded
  std::vector<T> to_host() const {
    heap_.synchronize();
    detail::DeviceListState state{};
    state_.copy_to_host(&state, 0, sizeof(state));
    std::vector<T> values(state.size);
    const View handle = view();
    for (int chunk = 0; chunk < detail::kDeviceListChunks; ++chunk) {
      const std::uint64_t begin = handle.chunk_begin(chunk);
      if (begin >= state.size) break;
      const std::uint64_t count = std::min(handle.chunk_elements(chunk), state.size - begin);
      if (state.chunks[chunk] <= detail::kChunkBeingAllocated)
        throw error("soaheap: DeviceList elements " + std::to_string(begin) + ".." + std::to_string(begin + count - 1) +
                    " have no storage (an append ran out of memory); clear() the list");
      copy_out(values.data() + begin, state.chunks[chunk], count * sizeof(T));
    }
    return values;
  }

  /// @brief Frees the storage and empties the list (waits for the heap's kernels; errors they
  /// recorded stay for the heap's next synchronizing call).
  void clear() {
    heap_.launch(detail::kDeviceListChunks, detail::ClearDeviceListKernel<View>{view()});
    heap_.executor().synchronize();
    const std::uint64_t zero = 0;
    state_.copy_from_host(offsetof(detail::DeviceListState, size), &zero, sizeof(zero));
  }

 private:
  void copy_out(T* destination, std::uint64_t address, std::size_t bytes) const {
    if (heap_.backend() == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemcpy(destination, reinterpret_cast<const void*>(address), bytes, cudaMemcpyDeviceToHost));
#endif
    } else {
      std::memcpy(static_cast<void*>(destination), reinterpret_cast<const void*>(address), bytes);
    }
  }

  HeapType& heap_;
  detail::Memory state_;
  std::uint64_t first_chunk_elements_;
};

}  // namespace soaheap
