#pragma once
/// @file heap.cuh
/// @brief `Heap<Classes...>`: the owning host object of a soaheap heap. It allocates the blocks,
///        launches bulk operations (parallel_new, parallel_do, stats, validate), reports errors that
///        kernels recorded, and hands out HeapView handles for kernels.

#include <soaheap/base/log.hpp>
#include <soaheap/core/backend.cuh>
#include <soaheap/core/detail/growable_memory.cuh>
#include <soaheap/core/detail/heap_buffers.cuh>
#include <soaheap/core/detail/heap_growth.cuh>
#include <soaheap/core/detail/kernels.cuh>
#include <soaheap/core/detail/operation_timer.cuh>
#include <soaheap/core/detail/operations_ahead.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/heap_options.hpp>
#include <soaheap/core/heap_view.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/core/stats.hpp>
#include <soaheap/core/untyped_memory.cuh>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <typeindex>
#include <vector>

#if SOAHEAP_HAS_CUDA
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>
#endif

namespace soaheap {

/// @brief A heap of managed objects of @p Classes.
/// @tparam Classes every managed class that will be allocated in it (abstract bases included)
template <class... Classes>
class Heap {
  // Private: the library's layers reach it through detail::internals(heap).
  using Internals = detail::HeapInternals<Classes...>;

 public:
  using View = HeapView<Classes...>;
  using Layout = HeapLayout<Classes...>;
  static constexpr int kClassCount = Layout::kClassCount;
  template <class T>
  static constexpr int class_id = View::template class_id<T>;
  template <class T>
  static constexpr int capacity = Layout::template capacity<T>;

  /// @throw invalid_argument when the size is missing, ambiguous or smaller than one block
  /// @throw error when the heap's addresses leave no free high bits for object-pointer tags
  explicit Heap(const HeapOptions& options);

  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  /// @brief The handle kernels and host threads allocate through: `new (heap.view()) T(...)`.
  View view() const {
    // A growable heap: room for the kernel this view is for to double the heap (may synchronize).
    if (grower_ != nullptr) const_cast<Heap*>(this)->keep_growth_headroom();
    View view;
    detail::internals(view) = make_internals();
    return view;
  }

  /// Lets host code write `new (heap) T(...)` on the host backend.
  template <class T>
  void* allocate_slot() const {
    require_host_backend("new (heap) T on the host");
    return view().template allocate_slot<T>();
  }
  /// Lets host code call soaheap::create_if on the host backend.
  template <class T>
  void* allocate_slot_if(bool wanted) const {
    require_host_backend("soaheap::create_if on the host");
    return view().template allocate_slot_if<T>(wanted);
  }
  /// Lets host code call soaheap::create_if_near on the host backend.
  template <class T>
  void* allocate_slot_if_near(bool wanted, const T* near) const {
    require_host_backend("soaheap::create_if_near on the host");
    return view().template allocate_slot_if_near<T>(wanted, near);
  }
  template <class T>
  void destroy_object(T* object) const {
    require_host_backend("destroy(heap, p) on the host");
    view().destroy_object(object);
  }

  Backend backend() const { return options_.backend; }
  /// @brief True for a cuda heap in managed memory (HeapMemory::managed): host code may then follow
  /// object pointers and read and write fields between kernels, after synchronize().
  bool managed() const { return options_.backend == Backend::cuda && options_.memory == HeapMemory::managed; }
  /// @brief Blocks with headers and bitmap bits: what kernels may index (>= mapped_block_count()).
  std::uint64_t block_count() const { return block_count_; }
  static constexpr std::uint64_t block_bytes() { return Layout::kDataBytes; }
  /// @brief Bytes the heap occupies now: data segments, block headers and bitmaps (resident_bytes()).
  std::uint64_t heap_bytes() const { return resident_bytes(); }

  // ---- memory that follows the live set (HeapOptions::max_bytes; docs/decisions/027) ---------------
  bool growable() const { return grower_ != nullptr; }
  /// @brief Bytes of memory the heap holds now: mapped data, headers and bitmaps.
  std::uint64_t resident_bytes() const;
  /// @brief Bytes of device (host) memory the heap keeps beside resident_bytes() for its own
  /// operations: enumeration lists and parallel_do snapshots (12 bytes per block of block_count()
  /// for each class that was enumerated), statistics counters. Made on first use, kept.
  std::uint64_t scratch_bytes() const;
  /// @brief Bytes the heap may grow to (its max_bytes; its size for a fixed heap).
  std::uint64_t max_bytes() const { return max_bytes_; }
  /// @brief Blocks with data memory that allocation may use; grows while kernels run.
  std::uint64_t mapped_block_count() const { return mapped_blocks_.load(); }
  /// @brief Blocks mapped at construction (the size asked for): releasing never goes below them.
  std::uint64_t initial_mapped_blocks() const { return initial_mapped_blocks_; }
  /// @brief Maps memory for at least @p blocks blocks now (parallel_new does it for what it
  /// creates). False when max_bytes or the GPU's memory does not allow it.
  bool reserve_blocks(std::uint64_t blocks);
  /// @brief Gives back the chunks that malloc's current regions hold unhanded, then unmaps the
  /// whole chunks of free blocks at the heap's end, down to the initial size, and the block headers
  /// above growth_headroom times what stays; returns the bytes released. Nothing moves
  /// (soaheap::trim gathers objects first). Synchronizes. 0 for a fixed heap.
  std::uint64_t release_free_memory();
  /// @brief The longest host answer to a kernel waiting for growth (nanoseconds).
  std::uint64_t longest_growth_nanoseconds() const { return grower_ ? grower_->longest_answer_nanoseconds() : 0; }
  /// @brief Worker threads of the host backend (0 on cuda).
  unsigned host_threads() const { return pool_ ? pool_->size() : 0; }
  const detail::Executor& executor() const { return executor_; }

  static const char* class_name(int class_index) {
    static constexpr const char* kNames[] = {Classes::kName...};
    return class_index >= 0 && class_index < kClassCount ? kNames[class_index] : "<unknown class>";
  }
  /// @brief Id of the class named @p name, or -1.
  static int class_id_by_name(const std::string& name) {
    for (int c = 0; c < kClassCount; ++c)
      if (name == class_name(c)) return c;
    return -1;
  }
  static int capacity_of_class(int class_index) { return Internals::capacity_of_class(class_index); }
  static bool class_is_abstract(int class_index) {
    static constexpr bool kAbstract[] = {Classes::kAbstract...};
    return class_index >= 0 && class_index < kClassCount && kAbstract[class_index];
  }

  // ---- bulk operations ---------------------------------------------------------------------------

  // Bulk operations are asynchronous on the cuda backend: they only enqueue kernels on the heap's
  // stream, allocate nothing and never wait for the GPU. Errors that kernels record (out of memory,
  // bad destroys) are thrown by the next synchronizing call: synchronize(), stats(), count(),
  // for_each(), validate(), defragmentation, or the block counters. The host backend behaves the same.

  /// @brief Runs body(tid) for tid in [0, count) as one kernel (CUDA grid or host threads).
  /// @p body must be callable on the device for the cuda backend.
  template <class Body>
  void launch(std::uint64_t count, const Body& body) {
    const OperationGuard guard(*this, "launch");
    executor_.launch(count, body);
  }

  /// @brief Creates @p count objects of T in parallel; object i is constructed as T(i, arguments...).
  template <class T, class... Arguments>
  void parallel_new(std::uint64_t count, const Arguments&... arguments) {
    if (growable()) reserve_blocks(mapped_block_count() + (count + capacity<T> - 1) / capacity<T>);
    const OperationGuard guard(*this, "parallel_new");
    using Pack = decltype(detail::make_argument_pack(arguments...));
    executor_.launch(count, detail::ParallelNewKernel<View, T, Pack>{view(), detail::make_argument_pack(arguments...)});
  }

  /// @brief Waits for every operation so far and throws the first error a kernel recorded.
  /// @throw out_of_memory, usage_error as recorded by kernels; cuda_error for a failed kernel
  void synchronize() const;

  /// @brief Throws an error that a kernel has recorded and already signalled to the host, without
  /// waiting for operations still running (their errors come with a later check or synchronize()).
  /// On the host backend, whose operations have finished when they return, any recorded error.
  /// @throw out_of_memory, usage_error as recorded by kernels
  void throw_signalled_error() const {
    const std::uint64_t* signal = error_signal_.host();
    if (signal != nullptr && *static_cast<const volatile std::uint64_t*>(signal) == 0) return;
    synchronize();  // the error word is final once the kernels that raised the signal are done
  }

  /// @brief Runs `Method` on every object of T and its subclasses that exists when the call starts.
  /// Objects created meanwhile are not visited. The method may destroy `this` and objects of
  /// classes outside T's hierarchy, but no other object of T or its subclasses (DynaSOAr's rule:
  /// the visit of such an object could not tell whether it comes before or after the destroy).
  /// One enumeration kernel, whatever the class count, lists the blocks of every concrete subclass and
  /// takes their iteration snapshots (so objects of one subclass created by the method of another are
  /// not visited either); then one method kernel per concrete subclass reads its block count on the
  /// device, each thread serving up to kParallelDoRows objects (see Executor::launch_counted). For
  /// one concrete class whose list was tiny the last time, both run as one cooperative grid
  /// (Executor::launch_pair). Nothing is allocated, copied or waited for.
  template <class T, auto Method, class... Arguments>
  void parallel_do(const Arguments&... arguments) {
    run_parallel_do<T, T, false, Method>("parallel_do", arguments...);
  }

  /// @brief Like parallel_do, but visits only the objects whose class is exactly C, not those of
  /// its subclasses (DynaSOAr's parallel_do_single_type). `Method` may be a method of a base of C.
  template <class C, auto Method, class... Arguments>
  void parallel_do_exact(const Arguments&... arguments) {
    static_assert(class_id<C> >= 0, "soaheap: this class is not one of the heap's classes");
    static_assert(!C::kAbstract, "soaheap: parallel_do_exact needs a concrete class (an abstract one has no objects)");
    using Declaring = typename detail::member_function_traits<decltype(Method)>::owner;
    static_assert(std::is_base_of_v<Declaring, C>, "soaheap: parallel_do_exact<C, Method>: Method must belong to C or a base of C");
    run_parallel_do<Declaring, C, true, Method>("parallel_do_exact", arguments...);
  }

  /// parallel_do's launch sizes (detail/tuning.cuh says why each is what it is).
  static constexpr int kParallelDoRows = detail::kParallelDoRows;
  static constexpr std::uint64_t kSparseEnumerationItems = detail::kSparseEnumerationItems;
  static constexpr std::uint64_t kHierarchyLaunchMaxItems = detail::kHierarchyLaunchMaxItems;

  /// Number of concrete classes of the heap that are T or derive from it.
  template <class T>
  static constexpr int concrete_subclass_count() {
    return (0 + ... + static_cast<int>(std::is_base_of_v<T, Classes> && !Classes::kAbstract));
  }

  /// @brief Host-side visit of every live object of T and its subclasses (a copy for a cuda heap in
  /// device memory, the heap itself for a managed one): fn(const T*) may read fields; to write, use
  /// for_each_writable. For tests and tools.
  /// On a device-memory cuda heap pointer fields hold device addresses: compare them, never follow them.
  template <class T, class Function>
  void for_each(Function&& fn) const {
    if (managed()) {  // the live heap, no copy
      synchronize();
      view().template for_each_object<T>([&](T* object) { fn(static_cast<const T*>(object)); });
      return;
    }
    const Snapshot snapshot = take_snapshot(true);
    snapshot.view.template for_each_object<T>([&](T* object) { fn(static_cast<const T*>(object)); });
  }

  /// @brief Host-side visit that may write: fn(T*) for every live object of T and its subclasses,
  /// and the fields it writes reach the heap. On the cuda backend the heap's data is copied to the
  /// host and back (whole, so use it between kernels: setup, checks, rendering, not per
  /// iteration), and pointer fields hold device addresses there: compare or assign them, never
  /// follow them. A managed heap is visited in place, and its pointers may be followed. fn must not
  /// create or destroy objects.
  template <class T, class Function>
  void for_each_writable(Function&& fn);

  /// @brief Number of live objects of T and its subclasses.
  template <class T>
  std::uint64_t count() const {
    const HeapStats all = stats();
    std::uint64_t total = 0;
    Internals::template for_each_concrete_subclass<T>(
        [&](auto tag) { total += all.classes[class_id<detail::tag_type_t<decltype(tag)>>].used_slots; });
    return total;
  }

  /// @brief Seconds parallel_do has spent enumerating blocks (block lists and iteration snapshots)
  /// since the heap was created: the enumeration overhead of the DynaSOAr paper. Measured only with
  /// HeapOptions::time_enumeration (on cuda from the first start to the last end of the warps of
  /// each enumeration launch); 0 otherwise. Waits for the heap's stream.
  double enumeration_seconds() const;

  /// @brief Blocks in use now (not free). Synchronizes.
  std::uint64_t allocated_block_count() const {
    return read_runtime_counter(offsetof(detail::HeapRuntimeState, allocated_blocks));
  }
  /// @brief The most blocks in use at any time since the heap was created or the peak was reset,
  /// kept on the device by the allocator (no statistics kernel needed). Synchronizes.
  std::uint64_t peak_allocated_blocks() const {
    return read_runtime_counter(offsetof(detail::HeapRuntimeState, peak_allocated_blocks));
  }
  /// @brief Restarts peak tracking from the blocks in use now.
  void reset_peak_allocated_blocks() {
    const std::uint64_t now = allocated_block_count();
    runtime_.copy_from_host(offsetof(detail::HeapRuntimeState, peak_allocated_blocks), &now, sizeof(now));
  }

  // ---- statistics and checks --------------------------------------------------------------------

  /// @brief Per-class occupancy, computed by one kernel over the block headers.
  HeapStats stats() const;

  /// @brief Checks every invariant of the heap (between kernels).
  /// @throw invariant_violation naming the block, class and broken invariant
  void validate(Validation level = Validation::full) const;

  /// @brief Throws (and clears) the error a kernel recorded since the last check, if any.
  /// @throw out_of_memory naming the class and the heap size; usage_error for bad destroys
  void throw_recorded_error() const;

  /// " (Cell: 120000 blocks, 96.1% full; ...)": where the blocks went, for an out-of-memory message
  /// (a full heap of half-empty blocks calls for defragmentation, not a larger heap). Empty when
  /// the statistics cannot be taken, so that the out-of-memory error itself always reaches the user.
  std::string occupancy_summary() const;
  /// What growth did about an out of memory: the limit, the device's memory, or no growth at all.
  std::string growth_summary() const;

  // ---- defragmentation support -------------------------------------------------------------------

  /// @brief Sets the defragmentation factor n of class @p class_index (blocks at most n/(n+1) full
  /// are candidates) and rebuilds its defrag bitmap.
  /// @throw invalid_argument unless 1 <= n <= N_T - 1
  void set_defrag_factor(int class_index, int factor);
  template <class T>
  void set_defrag_factor(int factor) {
    set_defrag_factor(class_id<T>, factor);
  }
  int defrag_factor(int class_index) const { return defrag_factor_[class_index]; }

  // ---- for the library's layers (defrag, profiler, distributed) -----------------------------------------
  // The types below are public; the functions that make them are private: block lists,
  // snapshots, the operation guard and per-heap state that the layers above core keep with the
  // heap, reached through detail::InternalsAccess (heap_view.cuh). Users call soaheap::defragment,
  // Profiler and migrate.
  /// @brief Block ids in memory of the heap's backend (owned by the heap: valid until the next
  /// enumeration of the same bitmap).
  using BlockList = detail::BlockList;

  /// Marks the heap busy for the duration of a bulk operation (refuses to nest).
  class OperationGuard {
   public:
    OperationGuard(const Heap& heap, const char* operation) : heap_(heap) {
      bool expected = false;
      if (!heap_.busy_.compare_exchange_strong(expected, true))
        throw usage_error(std::string("soaheap: ") + operation +
                          " refused: another parallel operation on this heap is in flight");
      if (heap_.grower_ == nullptr) return;
      try {
        const_cast<Heap&>(heap_).keep_growth_headroom();
        heap_.operations_ahead_.mark_and_wait(heap_.executor_);  // the launch queue never fills
      } catch (...) {  // an error an earlier kernel recorded: the heap is not left busy
        heap_.busy_.store(false);
        throw;
      }
    }
    ~OperationGuard() { heap_.busy_.store(false); }
    OperationGuard(const OperationGuard&) = delete;
    OperationGuard& operator=(const OperationGuard&) = delete;

   private:
    const Heap& heap_;
  };

  /// A host copy of the heap's metadata (and, if requested, data) with a view over it.
  using Snapshot = detail::HeapSnapshot<Internals>;

 private:
  friend struct detail::InternalsAccess;

  /// @brief Sorted ids of the blocks whose bit is set in bitmap @p bitmap_index (stream compaction
  /// into a buffer the heap keeps per bitmap; the count is read back, so this synchronizes).
  BlockList enumerate_blocks(int bitmap_index) const;

  /// @brief State that a higher layer keeps per heap (defrag's persistent scratch buffers and
  /// timers), made by its default constructor on first use and kept until the heap dies. Core never
  /// looks inside; one instance per type.
  template <class State>
  State& attachment() const {
    std::shared_ptr<void>& slot = attachments_[std::type_index(typeid(State))];
    if (!slot) slot = std::make_shared<State>();
    return *static_cast<State*>(slot.get());
  }

  /// @brief Throws usage_error naming @p operation while a bulk operation runs on this heap.
  void require_idle(const char* operation) const {
    if (busy_.load())
      throw usage_error(std::string("soaheap: ") + operation + " refused: a parallel operation on this heap is in flight");
  }


  Snapshot take_snapshot(bool with_data) const;

  Internals make_internals() const {
    Internals internals;
    internals.headers = headers_.as<BlockHeader>();
    internals.data_base = reinterpret_cast<std::uint64_t>(data_.get());
    internals.block_count = block_count_;  // never less than the blocks a running kernel may grow to
    internals.bitmap_words = bitmaps_.as<std::uint64_t>();
    internals.bitmap_shape = shape_.covering(block_count_);  // the levels above are not kept
    internals.state = runtime_.as<detail::HeapRuntimeState>();
    return internals;
  }
  /// parallel_do (Visited and its concrete subclasses) and parallel_do_exact (kExact: Visited only).
  /// The method kernels see the objects as T*: Visited or the base that declares Method.
  template <class T, class Visited, bool kExact, auto Method, class... Arguments>
  void run_parallel_do(const char* operation, const Arguments&... arguments);

  /// The ParallelDoKernels of Visited's concrete subclasses among @p Cs (heap order, as their
  /// enumeration @p targets), as one body (detail::ConcatenatedLists).
  template <class T, class Visited, auto Method, class Pack>
  static detail::ConcatenatedLists<> concatenate(const View&, const detail::EnumerationTarget*, const Pack&) {
    return {};
  }
  template <class T, class Visited, auto Method, class Pack, class C, class... Cs>
  static auto concatenate(const View& heap_view, const detail::EnumerationTarget* targets, const Pack& pack) {
    if constexpr (std::is_base_of_v<Visited, C> && !C::kAbstract) {
      const detail::ParallelDoKernel<View, T, C, Method, Pack> own{heap_view, targets->ids, targets->snapshots, pack};
      return detail::concatenate_lists(own, targets->count, concatenate<T, Visited, Method, Pack, Cs...>(heap_view, targets + 1, pack));
    } else {
      return concatenate<T, Visited, Method, Pack, Cs...>(heap_view, targets, pack);
    }
  }

  /// Calls f(type_tag<C>) for each class run_parallel_do visits: T, or T and its concrete subclasses.
  template <class T, bool Exact, class Function>
  static void for_each_visited_class(Function&& f) {
    if constexpr (Exact) {
      f(typename Internals::template type_tag<T>{});
    } else {
      Internals::template for_each_concrete_subclass<T>(f);
    }
  }

  static std::uint64_t block_count_for(const HeapOptions& options);
  /// Blocks that @p bytes hold with their headers and bitmap bits.
  static std::uint64_t blocks_for_bytes(std::uint64_t bytes);

  // Growth (heap.inl): the storage of a growable heap, its grower, and what runs between kernels.
  void make_storage(std::uint64_t initial_blocks);
  /// Raises block_count_ (headers and bitmap words that exist) to at least @p blocks. Synchronizes.
  void extend_capacity(std::uint64_t blocks);
  /// The blocks to index for @p mapped mapped ones: growth_headroom times them, or the power of 64
  /// below that when it keeps three quarters of it (a bitmap level fewer).
  std::uint64_t headroom_capacity(std::uint64_t mapped) const;
  /// Keeps block_count_ at headroom_capacity() of the mapped blocks: what a kernel may grow to.
  void keep_growth_headroom();
  /// The grower's work: maps data for blocks up to at least @p target (nothing else: see heap_growth.cuh).
  detail::HeapGrower::Result map_blocks(std::uint64_t target);
  /// A fixed heap's creation: the free bits of its @p blocks blocks (level 0 only, by copy).
  void write_free_words(std::uint64_t blocks);
  /// Enqueues the publication of blocks mapped since the host's last one (a waiting kernel may
  /// have published them already).
  void publish_grown_blocks() const;
  bool commit_metadata(std::uint64_t blocks);  ///< maps headers and bitmap words of [0, blocks)
  /// Gives back the headers and bitmap words of blocks [@p blocks, block_count_) (all free, unmapped).
  void release_metadata_above(std::uint64_t blocks);
  /// Calls @p range(begin, end) with the byte range of bitmaps_ that holds the words of blocks
  /// [@p from, @p to) on each level, lowest first, while it returns true; returns the last answer.
  template <class F>
  bool for_each_bitmap_range(std::uint64_t from, std::uint64_t to, F&& range) const;
  std::uint64_t resident_bytes_locked() const {  ///< resident_bytes() under the grower's lock
    return data_.resident_bytes() + headers_.resident_bytes() + bitmaps_.resident_bytes();
  }

  /// A managed heap must fit into the GPU's free memory: over-subscribed managed memory would page
  /// between host and GPU inside every kernel instead of failing.
  static void refuse_oversubscription(std::uint64_t bytes);

  void check_address_space() const;

  void initialize();

  void require_host_backend(const char* what) const {
    if (options_.backend != Backend::host)
      throw usage_error(std::string("soaheap: ") + what + " needs the host backend; on cuda use heap.view() in a kernel");
  }

  void ensure_scratch(std::size_t bytes) const {
    if (scratch_.bytes() < bytes) scratch_ = detail::Memory(options_.backend, bytes);
  }

  using ListBuffer = detail::ListBuffer;
  ListBuffer& list_buffer(int bitmap_index) const;
  /// The list an EnumerateKernel fills for the allocated blocks of @p class_index.
  detail::EnumerationTarget next_enumeration(int class_index) const;

  /// The clock the next enumeration launch stamps: none unless timed on cuda; its two intervals in
  /// turn (EnumerationClock).
  detail::EnumerationStamp next_enumeration_stamp() const;

  std::uint64_t read_runtime_counter(std::size_t offset) const {
    synchronize();
    std::uint64_t value = 0;
    runtime_.copy_to_host(&value, offset, sizeof(value));
    return value;
  }

  HeapOptions options_;
  std::uint64_t block_count_ = 0;
  std::uint64_t max_blocks_ = 0;  ///< blocks of the reservation (= block_count_ for a fixed heap)
  std::uint64_t max_bytes_ = 0;
  std::atomic<std::uint64_t> mapped_blocks_{0};
  std::uint64_t initial_mapped_blocks_ = 0;
  std::atomic<std::uint64_t> growth_limit_{0};  ///< block_count_ as the grower thread may read it
  mutable std::uint64_t published_host_ = 0;     ///< blocks whose publication the host has enqueued
  BitmapShape shape_{};  ///< of the reservation; kernels use the levels that cover block_count_
  std::unique_ptr<detail::ThreadPool> pool_;
  detail::Executor executor_;
  detail::GrowableMemory data_;
  detail::GrowableMemory headers_;
  detail::GrowableMemory bitmaps_;  ///< every bitmap, interleaved word by word, shaped for max_blocks_
  std::unique_ptr<detail::HeapGrower> grower_;
  /// A growable heap's operations: the host stays kGrowableOperationsAhead ahead of the GPU at most.
  mutable detail::OperationsAhead operations_ahead_{detail::kGrowableOperationsAhead};
  detail::Memory runtime_;
  /// Raised by the first recorded error (HeapRuntimeState::error_signal); empty on the host backend.
  detail::MappedWord error_signal_;
  mutable detail::Memory scratch_;
  mutable detail::Memory statistics_counters_;
  mutable std::vector<ListBuffer> block_lists_;
  /// Per class: the objects of the last one-launch parallel_do over it and its subclasses (made on first use).
  mutable std::array<detail::LaunchHintWord, kClassCount> hierarchy_hints_;
  mutable detail::OperationTimer enumeration_timer_;  ///< host backend (cuda: EnumerationStamp)
  mutable int enumeration_slot_ = 0;                   ///< interval of the last enumeration launch
  mutable std::map<std::type_index, std::shared_ptr<void>> attachments_;
  int defrag_factor_[kClassCount] = {};
  mutable std::atomic<bool> busy_{false};
};

namespace detail {
template <class... Classes>
HeapInternals<Classes...> internals(const Heap<Classes...>& heap) {
  return internals(heap.view());
}
}  // namespace detail

}  // namespace soaheap

#include <soaheap/core/detail/heap.inl>
#include <soaheap/core/detail/heap_storage.inl>
#include <soaheap/core/detail/validate.hpp>
