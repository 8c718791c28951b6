#pragma once
/// @file dynasoar/allocator_handle.h
/// @brief `AllocatorHandle<AllocatorT>`: DynaSOAr's host-side owner of an allocator, here owning a
///        soaheap::Heap and a copy of the device-side SoaAllocator in the heap's memory.

#include <soaheap/compat/dynasoar/soa_allocator.h>
#include <soaheap/core/backend.cuh>
#include <soaheap/core/detail/operations_ahead.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/heap.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/defrag/defrag_options.hpp>
#include <soaheap/defrag/defragment.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <type_traits>

#ifndef SOAHEAP_DYNASOAR_ASYNCHRONOUS
/// Build flag: whether AllocatorHandle's bulk operations return before the GPU has finished them
/// (the default of AllocatorHandle::set_synchronous), for programs that cannot be changed to call it.
/// -1 (default): on a heap in device memory, which host code reaches only through CUDA calls ordered
/// after them, each returns once the operation before it has finished; where host code reads the heap
/// itself (a unified heap, the host backend) each waits for its own end. 0: each waits for its own
/// end everywhere, as DynaSOAr's do. 1: each returns after the one before it everywhere.
#define SOAHEAP_DYNASOAR_ASYNCHRONOUS -1
#endif

#ifndef SOAHEAP_DYNASOAR_TIME_ENUMERATION
/// Build flag: 0 leaves the enumeration of parallel_do untimed (DBG_get_enumeration_time() then
/// returns 0), which saves the enumeration kernel's clock stamps (two atomics per warp).
#define SOAHEAP_DYNASOAR_TIME_ENUMERATION 1
#endif

#ifndef SOAHEAP_DYNASOAR_GROW
/// Build flag: 1 (default) lets the handle's heap grow past SoaAllocator's object count when the
/// program needs more (HeapOptions::max_bytes = the GPU's memory), since DynaSOAr's programs never
/// check `new` for nullptr. growth_headroom 64, the most there is: they create all their cells in
/// one kernel (wa-tor with an allocator of 262,144 objects needs 20 times its heap in its first
/// kernel), and their own kernels run without the handle, which can raise the limit only at its
/// own operations; the block headers and bitmap words of 64 times the heap cost about 42 bytes per
/// block. 0 keeps DynaSOAr's fixed heap. A unified-memory heap stays fixed.
#define SOAHEAP_DYNASOAR_GROW 1
#endif

#ifndef SOAHEAP_DYNASOAR_PACK_ALLOCATIONS
/// Build flag: HeapOptions::pack_allocations for the handle's heap, 1 by default (lanes of diverged
/// warps look again before they start a new block). DynaSOAr's programs size their heaps for
/// DynaSOAr's allocator and seldom defragment: their game-of-life, whose candidates are created in
/// loops of differing length, ran out of its heap in 2 of 3 runs on an H100 without it (Candidate
/// blocks 24 % full), and ran faster with it (docs/dynasoar-migration.md, 2026-11-28). 0: off.
#define SOAHEAP_DYNASOAR_PACK_ALLOCATIONS 1
#endif

namespace soaheap::compat::dynasoar {

/// @brief Default `min_num_compactions` of parallel_defrag: a pass runs when it has a source block.
inline constexpr int kMinDefragCandidates = 1;

/// @brief DynaSOAr's host-side allocator handle over a soaheap heap.
///
/// Differences from DynaSOAr (see docs/dynasoar-migration.md): out of memory stops the program in
/// `new` with a message naming the class (SOAHEAP_DYNASOAR_NULL_ON_OUT_OF_MEMORY: nullptr instead),
/// and makes a bulk operation throw soaheap::out_of_memory (DynaSOAr retries forever). DynaSOAr's
/// bulk operations wait for their own end, because each launch needs a block count from the GPU;
/// soaheap's launches do not. So on a heap in device memory a bulk operation returns once the
/// operation before it has finished (the GPU then finds the next one queued) and throws the errors
/// that operation recorded; the statistics, DBG_ and defragmentation calls wait for everything. On a
/// unified heap and on the host backend each operation waits for its own end and reports its own
/// errors. set_synchronous() chooses either for any heap.
/// @tparam AllocatorT a SoaAllocator<kNumObjects, Classes...>
template <class AllocatorT>
class AllocatorHandle {
 public:
  using Heap = typename AllocatorT::Heap;

  AllocatorHandle(const AllocatorHandle&) = delete;
  AllocatorHandle& operator=(const AllocatorHandle&) = delete;

  /// @brief DynaSOAr's constructor: a heap for AllocatorT's object count, on the GPU when this
  /// translation unit is compiled by nvcc (DynaSOAr programs' methods are device code), else on the
  /// host backend.
  /// @throw soaheap::usage_error when compiled by nvcc and no GPU is present
  /// @param unified_memory on cuda, the heap and the allocator object live in CUDA managed memory
  ///        (HeapMemory::managed), as in DynaSOAr: after the kernels have finished (the handle's
  ///        operations wait; after your own kernels call cudaDeviceSynchronize()), host code may
  ///        follow object pointers, read and write fields, and call
  ///        `device_pointer()->device_do<T>(...)` on the live heap
  /// @throw soaheap::out_of_memory when a unified heap would not fit into the GPU's free memory
  explicit AllocatorHandle(bool unified_memory = false) : AllocatorHandle(default_options(unified_memory)) {}

  /// @brief soaheap extension: the object count of AllocatorT on the given backend.
  explicit AllocatorHandle(::soaheap::Backend backend) : AllocatorHandle(options_for(backend)) {}

  /// @brief soaheap extension: any heap size (bytes or objects) and backend, chosen at run time.
  /// @throw soaheap::invalid_argument for a missing, ambiguous or too small size
  explicit AllocatorHandle(const ::soaheap::HeapOptions& options)
      : heap_(options),
        allocator_memory_(options.backend, sizeof(AllocatorT), heap_.managed()),
        synchronous_(SOAHEAP_DYNASOAR_ASYNCHRONOUS < 0 ? host_reads_heap() : SOAHEAP_DYNASOAR_ASYNCHRONOUS == 0) {
    upload_view();
  }

  /// @brief The allocator object in the heap's memory, for kernels (`__device__ AllocatorT*`).
  AllocatorT* device_pointer() const { return allocator_memory_.template as<AllocatorT>(); }

  // ---- parallel do-all ----------------------------------------------------------------------------

  /// @brief Runs `T::func` on every object of T and its subclasses that exists when the call starts.
  /// Also takes arguments (`parallel_do<T, &T::f>(a, b)`), a soaheap extension.
  template <class T, auto func, class... Args>
  void parallel_do(Args... args) {
    heap_.template parallel_do<T, func>(args...);
    finish_operation();
  }
  /// @brief DynaSOAr's form that names the parameter type: `parallel_do<T, float, &T::f>(dt)`.
  template <class T, class P1, void (T::*func)(P1)>
  void parallel_do(P1 p1) {
    heap_.template parallel_do<T, func>(p1);
    finish_operation();
  }

  /// @brief Runs `T::func` on the objects whose class is exactly IterT (a T or a subclass of T),
  /// not on those of IterT's subclasses: DynaSOAr's `parallel_do_single_type<IterT, T, &T::f>()`.
  template <class IterT, class T, auto func, class... Args>
  void parallel_do_single_type(Args... args) {
    static_assert(std::is_base_of_v<T, IterT>, "parallel_do_single_type<IterT, T, func>: IterT must be T or derive from T");
    heap_.template parallel_do_exact<IterT, func>(args...);
    finish_operation();
  }
  /// @brief The form that names the parameter type: `parallel_do_single_type<IterT, T, int, &T::f>(v)`.
  template <class IterT, class T, class P1, void (T::*func)(P1)>
  void parallel_do_single_type(P1 p1) {
    parallel_do_single_type<IterT, T, func>(p1);
  }

  /// @brief The same as parallel_do: soaheap's enumeration is a single fused kernel, so there is no
  /// separate bitmap scan for DynaSOAr's fast variant to skip.
  template <class T, auto func, class... Args>
  void fast_parallel_do(Args... args) {
    parallel_do<T, func>(args...);
  }
  template <class T, class P1, void (T::*func)(P1)>
  void fast_parallel_do(P1 p1) {
    parallel_do<T, P1, func>(p1);
  }

  /// @brief Creates @p num_objects objects of T in parallel; object i is constructed as T(i, args...).
  /// @throw soaheap::invalid_argument when num_objects is negative
  template <class T, class... Args>
  void parallel_new(long long num_objects, Args... args) {
    if (num_objects < 0)
      throw ::soaheap::invalid_argument("parallel_new: num_objects=" + std::to_string(num_objects) +
                                        " is negative");
    heap_.template parallel_new<T>(static_cast<std::uint64_t>(num_objects), args...);
    finish_operation();
  }

  /// @brief Host-side device_do: runs `(object->*func)(args...)` (a member function) or
  /// `func(object, args...)` (a lambda, as collision's checksum does) for every object of T and its
  /// subclasses. On the host backend and on a unified (managed) heap it works on the heap itself;
  /// on a cuda heap in device memory on a host copy of the heap's data that is copied back
  /// afterwards, so the function's field writes reach the heap (Heap::for_each_writable); pointer
  /// fields hold device addresses there: never follow them (DynaSOAr needs unified memory for this).
  template <class T, class F, class... Args>
  void device_do(F func, Args... args) {
    heap_.template for_each_writable<T>([&](T* object) { std::invoke(func, object, args...); });
  }

  // ---- defragmentation --------------------------------------------------------------------------

  /// @brief Defragments the blocks of T (each concrete subclass of T) with forwarding pointers.
  /// @param min_num_compactions a pass runs only with at least this many source blocks
  template <class T>
  void parallel_defrag(int min_num_compactions = kMinDefragCandidates) {
    defrag<T>(min_num_compactions, ::soaheap::RewriteStrategy::forwarding_pointers);
  }
  /// @brief DynaSOAr's record-based variant; soaheap's records strategy sizes its records itself.
  template <class T, int NumRecords>
  void parallel_defrag(int min_num_compactions = kMinDefragCandidates) {
    static_assert(NumRecords > 0, "parallel_defrag: NumRecords must be positive");
    defrag<T>(min_num_compactions, ::soaheap::RewriteStrategy::records);
  }

  /// @brief Prints what defragmentation did so far and its time per phase.
  void DBG_print_defrag_time() const {
    const ::soaheap::DefragPhaseTimes& times = defrag_totals_.times;
    std::printf("defrag: %d runs, %d passes, %llu objects moved, %llu blocks freed, %.3f ms (scan %.3f, copy %.3f, "
                "forward %.3f, rewrite %.3f, state %.3f)\n",
                defrag_runs_, defrag_totals_.passes, static_cast<unsigned long long>(defrag_totals_.objects_moved),
                static_cast<unsigned long long>(defrag_totals_.blocks_freed), times.total_ms(), times.scan_ms,
                times.copy_ms, times.forward_ms, times.rewrite_ms, times.state_ms);
  }

  /// @brief soaheap extension: passes, moved objects, freed blocks and phase times of all
  /// parallel_defrag calls so far, summed.
  const ::soaheap::DefragResult& defrag_totals() const { return defrag_totals_; }

  // ---- statistics ---------------------------------------------------------------------------------

  /// @brief Microseconds parallel_do has spent enumerating objects (measured on the device; 0 when
  /// built with SOAHEAP_DYNASOAR_TIME_ENUMERATION=0). Waits for all operations and throws the first
  /// error a kernel recorded.
  long unsigned int DBG_get_enumeration_time() const {
    heap_.synchronize();  // often a program's last call: the errors of operations that ran ahead come here
    return static_cast<long unsigned int>(heap_.enumeration_seconds() * 1e6);
  }

  /// @brief Prints per class the blocks (allocated, active, defragmentation candidates) and slots
  /// (allocated, used) with the fragmentation, and the free blocks.
  void DBG_print_state_stats() const {
    const ::soaheap::HeapStats stats = heap_.stats();
    std::printf("%-20s %10s %10s %10s %12s %12s %9s\n", "class", "#B_alloc", "#B_cand", "#B_active", "#O_alloc",
                "#O_used", "O_frag");
    std::printf("%-20s %10llu\n", "(free)", static_cast<unsigned long long>(stats.free_blocks));
    std::uint64_t allocated_slots = 0;
    std::uint64_t used_slots = 0;
    for (const ::soaheap::ClassStats& entry : stats.classes) {
      std::printf("%-20s %10llu %10llu %10llu %12llu %12llu %9.6f\n", entry.name.c_str(),
                  static_cast<unsigned long long>(entry.allocated_blocks),
                  static_cast<unsigned long long>(entry.candidate_blocks),
                  static_cast<unsigned long long>(entry.active_blocks),
                  static_cast<unsigned long long>(entry.allocated_slots()),
                  static_cast<unsigned long long>(entry.used_slots), entry.fragmentation());
      allocated_slots += entry.allocated_slots();
      used_slots += entry.used_slots;
    }
    std::printf("%-20s %10llu %10s %10s %12llu %12llu %9.6f\n", "(all)",
                static_cast<unsigned long long>(stats.allocated_blocks()), "", "",
                static_cast<unsigned long long>(allocated_slots), static_cast<unsigned long long>(used_slots),
                stats.fragmentation());
  }

  /// @brief Records the heap's current use; DBG_print_collected_stats() prints the maxima.
  void DBG_collect_stats() {
    const ::soaheap::HeapStats stats = heap_.stats();
    std::uint64_t allocated_slots = 0;
    std::uint64_t used_slots = 0;
    for (const ::soaheap::ClassStats& entry : stats.classes) {
      allocated_slots += entry.allocated_slots();
      used_slots += entry.used_slots;
    }
    ++collected_.samples;
    collected_.max_allocated_blocks = std::max(collected_.max_allocated_blocks, stats.allocated_blocks());
    collected_.max_allocated_slots = std::max(collected_.max_allocated_slots, allocated_slots);
    collected_.max_used_slots = std::max(collected_.max_used_slots, used_slots);
    collected_.max_fragmentation = std::max(collected_.max_fragmentation, stats.fragmentation());
  }

  void DBG_print_collected_stats() const {
    std::printf("collected over %llu samples: max allocated blocks %llu of %llu, max allocated slots %llu, "
                "max used slots %llu, max fragmentation %.6f\n",
                static_cast<unsigned long long>(collected_.samples),
                static_cast<unsigned long long>(collected_.max_allocated_blocks),
                static_cast<unsigned long long>(heap_.block_count()),
                static_cast<unsigned long long>(collected_.max_allocated_slots),
                static_cast<unsigned long long>(collected_.max_used_slots), collected_.max_fragmentation);
  }

  // ---- soaheap extensions -------------------------------------------------------------------------

  /// @brief The soaheap heap, for everything the DynaSOAr API lacks (stats, validate, profiler, policies).
  Heap& heap() { return heap_; }
  const Heap& heap() const { return heap_; }

  /// @brief Waits for all operations and throws the first error a kernel recorded (e.g. out of memory).
  void synchronize() const { heap_.synchronize(); }

  /// @brief true (default on a unified heap and on the host backend, or everywhere when built with
  /// SOAHEAP_DYNASOAR_ASYNCHRONOUS=0): each bulk operation waits for its own end on the GPU and
  /// reports its kernels' errors before it returns, as DynaSOAr's do. false (default on a heap in
  /// device memory, everywhere with SOAHEAP_DYNASOAR_ASYNCHRONOUS=1): each returns once the operation
  /// before it has finished and throws that one's errors, so one operation at most runs behind the
  /// host; raw kernels and cudaMemcpy of the program on the default stream stay ordered after it, so
  /// the program sees its results as before. An error of the last operation comes with the next call
  /// that waits (synchronize(), DBG_ statistics, defragmentation) or the next bulk operation.
  void set_synchronous(bool synchronous) { synchronous_ = synchronous; }
  bool synchronous() const { return synchronous_; }

 private:
  static ::soaheap::HeapOptions options_for(::soaheap::Backend backend) {
    ::soaheap::HeapOptions options;
    options.objects = AllocatorT::kNumObjects;
    options.backend = backend;
    options.time_enumeration = SOAHEAP_DYNASOAR_TIME_ENUMERATION != 0;  // DynaSOAr always measures it
    options.pack_allocations = SOAHEAP_DYNASOAR_PACK_ALLOCATIONS != 0;
    if (SOAHEAP_DYNASOAR_GROW != 0) {
      options.max_bytes = ::soaheap::HeapOptions::kAllMemory;
      options.growth_headroom = 64;
    }
    return options;
  }
  static ::soaheap::HeapOptions default_options(bool unified_memory) {
    ::soaheap::HeapOptions options = options_for(SOAHEAP_HAS_CUDA ? ::soaheap::Backend::cuda : ::soaheap::Backend::host);
    if (unified_memory) {
      options.memory = ::soaheap::HeapMemory::managed;
      options.max_bytes = 0;  // managed heaps are fixed
    }
    return options;
  }

  /// Host code reads the objects themselves on a unified heap and on the host backend: there each
  /// operation must have finished when it returns.
  bool host_reads_heap() const { return heap_.managed() || heap_.backend() != ::soaheap::Backend::cuda; }

  void finish_operation() {
    if (synchronous_) {
      heap_.synchronize();
    } else {
      previous_operation_.mark_and_wait(heap_.executor());
      heap_.throw_signalled_error();
    }
    // A heap that grew gets more blocks that kernels may index: the allocator the program's own
    // kernels use must know them (rare: the blocks double at most per upload).
    if (heap_.growable()) {
      (void)heap_.view();  // keeps the heap's headroom for the next kernel
      if (heap_.block_count() != uploaded_block_count_) upload_view();
    }
  }
  /// Writes the allocator object (its HeapView) where the program's kernels find it.
  void upload_view() {
    const AllocatorT allocator(heap_.view());
    allocator_memory_.copy_from_host(0, &allocator, sizeof(AllocatorT));
    uploaded_block_count_ = heap_.block_count();
  }

  template <class T>
  void defrag(int min_num_compactions, ::soaheap::RewriteStrategy strategy) {
    if (min_num_compactions < 1)
      throw ::soaheap::invalid_argument("parallel_defrag: min_num_compactions=" +
                                        std::to_string(min_num_compactions) + " must be at least 1");
    ::soaheap::DefragOptions options;
    options.min_compactions = min_num_compactions;
    options.strategy = strategy;
    const ::soaheap::DefragResult result = ::soaheap::defragment<T>(heap_, options);
    ++defrag_runs_;
    defrag_totals_.passes += result.passes;
    defrag_totals_.blocks_freed += result.blocks_freed;
    defrag_totals_.objects_moved += result.objects_moved;
    defrag_totals_.bytes_moved += result.bytes_moved;
    defrag_totals_.times.scan_ms += result.times.scan_ms;
    defrag_totals_.times.copy_ms += result.times.copy_ms;
    defrag_totals_.times.forward_ms += result.times.forward_ms;
    defrag_totals_.times.rewrite_ms += result.times.rewrite_ms;
    defrag_totals_.times.state_ms += result.times.state_ms;
  }

  struct CollectedStats {
    std::uint64_t samples = 0;
    std::uint64_t max_allocated_blocks = 0;
    std::uint64_t max_allocated_slots = 0;
    std::uint64_t max_used_slots = 0;
    double max_fragmentation = 0;
  };

  Heap heap_;
  ::soaheap::detail::Memory allocator_memory_;
  std::uint64_t uploaded_block_count_ = 0;
  bool synchronous_;
  ::soaheap::detail::OperationsAhead previous_operation_{1};  // waits for the operation before
  int defrag_runs_ = 0;
  ::soaheap::DefragResult defrag_totals_;
  CollectedStats collected_;
};

}  // namespace soaheap::compat::dynasoar
