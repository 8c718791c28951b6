#pragma once
/// @file heap.cuh
/// @brief `Heap<Classes...>`: the owning host object of a soaheap heap. It allocates the blocks,
///        launches bulk operations (parallel_new, parallel_do, stats, validate), reports errors that
///        kernels recorded, and hands out HeapView handles for kernels.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/detail/kernels.cuh>
#include <soaheap/core/detail/operation_timer.cuh>
#include <soaheap/core/errors.hpp>
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

/// @brief Where a cuda heap keeps its objects.
enum class HeapMemory {
  device,   ///< GPU memory (the default): host code sees objects only through copies (for_each, stats)
  managed,  ///< CUDA managed (unified) memory: between kernels, after heap.synchronize(), host code
            ///< may read and write objects through their pointers; never larger than the GPU's free memory
};

/// @brief How big a heap is and where it runs. Give exactly one of `bytes` and `objects`.
struct HeapOptions {
  std::uint64_t bytes = 0;       ///< total memory for data, block headers and bitmaps
  std::uint64_t objects = 0;     ///< or: room for this many objects of the smallest class
  Backend backend = Backend::host;
  /// cuda only (host-backend heaps are host memory anyway): device or managed memory.
  HeapMemory memory = HeapMemory::device;
  /// Host backend worker threads; 0 = the environment variable SOAHEAP_HOST_THREADS when set
  /// (for programs that cannot pass options, e.g. DynaSOAr's through the shim), else all cores.
  unsigned host_threads = 0;
  /// Time the enumeration step of every parallel_do (see Heap::enumeration_seconds()): on cuda the
  /// enumeration kernel's warps stamp the GPU clock (a parallel_do over one class whose list was tiny
  /// runs enumeration and method in one launch, Executor::launch_pair: its enumeration part counts),
  /// on the host backend the host's clock measures the step.
  bool time_enumeration = false;
  /// cuda only: pack objects that lanes of diverged warps allocate (`new` in a branch or a loop of
  /// differing length) into fewer blocks. By default such a lane starts a new block as soon as the
  /// blocks it found had filled up under it; with many lanes allocating at once that leaves blocks
  /// about half full. Packed, it looks again a few times first: on an H100, 16–31 % fewer peak
  /// blocks for wa-tor, game-of-life, sugarscape and traffic without defragmentation, and wa-tor and
  /// game-of-life 5 % faster, but such allocations take 30–60 % longer, and with the `auto`
  /// defragmentation policy those applications ran 5–30 % slower (docs/performance.md, "Placement
  /// of diverged allocations"). For programs that do not defragment.
  bool pack_allocations = false;
};

/// @brief How thorough `validate()` is.
enum class Validation {
  structure,  ///< bitmaps, block headers and their agreement
  full,       ///< also every reflected pointer field: null or a live object of a fitting class
};

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
  explicit Heap(const HeapOptions& options) : options_(options) {
    block_count_ = block_count_for(options);
    executor_.backend = options.backend;
    if (options.backend == Backend::host) {
      pool_ = std::make_unique<detail::ThreadPool>(detail::host_thread_count(options.host_threads));
      executor_.pool = pool_.get();
    } else if (!cuda_available()) {
      throw usage_error("soaheap: the cuda backend needs a CUDA GPU, and none is available" +
                        std::string(SOAHEAP_HAS_CUDA ? "" : " (this translation unit was compiled without nvcc)"));
    }
    shape_ = BitmapShape::for_bits(block_count_);
    const bool managed = this->managed();
    const std::uint64_t data_bytes = block_count_ * Layout::kDataBytes;
    const std::uint64_t header_bytes = block_count_ * sizeof(BlockHeader);
    const std::uint64_t bitmap_bytes = Internals::kBitmapCount * shape_.total_words * sizeof(std::uint64_t);
    if (managed) refuse_oversubscription(data_bytes + header_bytes + bitmap_bytes);
    data_ = detail::Memory(options.backend, data_bytes, managed);
    headers_ = detail::Memory(options.backend, header_bytes, managed);
    bitmaps_ = detail::Memory(options.backend, bitmap_bytes, managed);
    runtime_ = detail::Memory(options.backend, sizeof(detail::HeapRuntimeState), managed);
    error_signal_ = detail::MappedWord(options.backend, 0);
    statistics_counters_ = detail::Memory(
        options.backend, kClassCount * detail::StatisticsKernel<Internals>::kCounters * sizeof(std::uint64_t));
    block_lists_.resize(Internals::kBitmapCount);
    // cuda times the enumerations on the device (EnumerationStamp), the host backend by its clock.
    enumeration_timer_.enabled = options.time_enumeration && options.backend == Backend::host;
    check_address_space();
    initialize();
  }

  Heap(const Heap&) = delete;
  Heap& operator=(const Heap&) = delete;

  /// @brief The handle kernels and host threads allocate through: `new (heap.view()) T(...)`.
  View view() const {
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
  std::uint64_t block_count() const { return block_count_; }
  static constexpr std::uint64_t block_bytes() { return Layout::kDataBytes; }
  /// @brief Bytes the heap occupies: data segments, block headers and bitmaps.
  std::uint64_t heap_bytes() const { return data_.bytes() + headers_.bytes() + bitmaps_.bytes(); }
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
    const OperationGuard guard(*this, "parallel_new");
    using Pack = decltype(detail::make_argument_pack(arguments...));
    executor_.launch(count, detail::ParallelNewKernel<View, T, Pack>{view(), detail::make_argument_pack(arguments...)});
  }

  /// @brief Waits for every operation so far and throws the first error a kernel recorded.
  /// @throw out_of_memory, usage_error as recorded by kernels; cuda_error for a failed kernel
  void synchronize() const {
    executor_.synchronize();
    // On cuda the first recorded error also raises a word of mapped host memory: reading it costs
    // no copy (a copy of the error word after each wait was about 40 % of what a synchronous,
    // DynaSOAr-style operation cost over an asynchronous one; docs/dynasoar-migration.md). Only an
    // error itself is then copied.
    std::uint64_t* signal = error_signal_.host();
    if (signal != nullptr) {
      if (*static_cast<volatile std::uint64_t*>(signal) == 0) return;
      *static_cast<volatile std::uint64_t*>(signal) = 0;
    }
    throw_recorded_error();
  }

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
  void for_each_writable(Function&& fn) {
    const OperationGuard guard(*this, "for_each_writable");
    if (managed()) {  // in place: the writes are the heap's
      synchronize();
      view().template for_each_object<T>([&](T* object) { fn(object); });
      return;
    }
    const Snapshot snapshot = take_snapshot(true);
    snapshot.view.template for_each_object<T>([&](T* object) { fn(object); });
    if (options_.backend == Backend::cuda) data_.copy_from_host(0, snapshot.data.get(), data_.bytes());
  }

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
  double enumeration_seconds() const {
    if (options_.backend == Backend::host) return enumeration_timer_.seconds(executor_);
    if (!options_.time_enumeration) return 0;
    executor_.synchronize();
    detail::EnumerationClock clock{};
    runtime_.copy_to_host(&clock, offsetof(detail::HeapRuntimeState, enumeration_clock), sizeof(clock));
    return static_cast<double>(clock.total_nanoseconds()) * 1e-9;
  }

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
  HeapStats stats() const {
    synchronize();
    constexpr int kCounters = detail::StatisticsKernel<Internals>::kCounters;
    detail::Memory& counters = statistics_counters_;
    counters.fill_zero();
    const std::uint64_t chunks =
        (block_count_ + detail::StatisticsKernel<Internals>::kBlocksPerThread - 1) / detail::StatisticsKernel<Internals>::kBlocksPerThread;
    executor_.run(chunks, detail::StatisticsKernel<Internals>{make_internals(), counters.as<std::uint64_t>()});
    std::vector<std::uint64_t> values(kClassCount * kCounters);
    counters.copy_to_host(values.data(), 0, values.size() * sizeof(std::uint64_t));
    HeapStats result;
    result.block_count = block_count_;
    result.block_bytes = Layout::kDataBytes;
    result.heap_bytes = heap_bytes();
    std::uint64_t allocated = 0;
    for (int c = 0; c < kClassCount; ++c) {
      ClassStats entry;
      entry.name = class_name(c);
      entry.class_id = c;
      entry.capacity = capacity_of_class(c);
      entry.abstract = class_is_abstract(c);
      entry.allocated_blocks = values[c * kCounters + 0];
      entry.used_slots = values[c * kCounters + 1];
      entry.active_blocks = values[c * kCounters + 2];
      entry.candidate_blocks = values[c * kCounters + 3];
      allocated += entry.allocated_blocks;
      result.classes.push_back(entry);
    }
    result.untyped = detail::collect_untyped_stats(executor_, make_internals(), runtime_);
    result.free_blocks = block_count_ - allocated - result.untyped.blocks();
    return result;
  }

  /// @brief Checks every invariant of the heap (between kernels).
  /// @throw invariant_violation naming the block, class and broken invariant
  void validate(Validation level = Validation::full) const;

  /// @brief Throws (and clears) the error a kernel recorded since the last check, if any.
  /// @throw out_of_memory naming the class and the heap size; usage_error for bad destroys
  void throw_recorded_error() const {
    std::uint64_t encoded = 0;
    runtime_.copy_to_host(&encoded, offsetof(detail::HeapRuntimeState, error), sizeof(encoded));
    if (encoded == 0) return;
    const std::uint64_t zero = 0;
    const_cast<detail::Memory&>(runtime_).copy_from_host(offsetof(detail::HeapRuntimeState, error), &zero, sizeof(zero));
    const auto kind = static_cast<HeapErrorKind>(encoded & 0xff);
    const int class_index = static_cast<int>((encoded >> 8) & 0xff);
    const std::uint64_t block = encoded >> 16;
    if (detail::is_untyped_error(kind)) detail::throw_untyped_error(kind, block, block_count_, heap_bytes(), Layout::kDataBytes);
    const std::string name = class_index < kClassCount ? class_name(class_index) : std::string("<unknown class>");
    std::ostringstream message;
    message << "soaheap: ";
    switch (kind) {
      case HeapErrorKind::out_of_memory:
      case HeapErrorKind::allocation_starved:
        message << "out of memory while allocating " << name << ": all " << block_count_ << " blocks of the "
                << heap_bytes() << "-byte heap are in use"
                << (kind == HeapErrorKind::allocation_starved ? " or contended beyond the retry limit" : "")
                << occupancy_summary() << "; new returned nullptr. Free objects or create a larger heap";
        throw out_of_memory(message.str());
      case HeapErrorKind::destroy_of_free_slot:
        message << "destroy of a " << name << " in block " << block << " that is not alive (destroyed twice?)";
        throw usage_error(message.str());
      case HeapErrorKind::destroy_of_foreign_pointer:
        message << "destroy of a pointer that is not an object of this heap (class id " << class_index << ")";
        throw usage_error(message.str());
      default:
        message << "unknown recorded error code " << encoded;
        throw usage_error(message.str());
    }
  }

  /// " (Cell: 120000 blocks, 96.1% full; ...)": where the blocks went, for an out-of-memory message
  /// (a full heap of half-empty blocks calls for defragmentation, not a larger heap). Empty when
  /// the statistics cannot be taken, so that the out-of-memory error itself always reaches the user.
  std::string occupancy_summary() const {
    try {
      const HeapStats now = stats();
      std::ostringstream text;
      const char* separator = " (";
      for (const ClassStats& entry : now.classes) {
        if (entry.allocated_blocks == 0) continue;
        text << separator << entry.name << ": " << entry.allocated_blocks << " blocks, "
             << std::fixed << std::setprecision(1) << 100.0 * (1.0 - entry.fragmentation()) << "% full";
        separator = "; ";
      }
      if (now.untyped.blocks() != 0) text << separator << "untyped memory: " << now.untyped.blocks() << " blocks";
      return text.str().empty() ? std::string() : text.str() + ")";
    } catch (const std::exception&) {
      return {};
    }
  }

  // ---- defragmentation support -------------------------------------------------------------------

  /// @brief Sets the defragmentation factor n of class @p class_index (blocks at most n/(n+1) full
  /// are candidates) and rebuilds its defrag bitmap.
  /// @throw invalid_argument unless 1 <= n <= N_T - 1
  void set_defrag_factor(int class_index, int factor) {
    if (class_index < 0 || class_index >= kClassCount)
      throw invalid_argument("soaheap: class id " + std::to_string(class_index) + " is not a class of this heap");
    const int capacity_c = capacity_of_class(class_index);
    if (factor < 1 || factor > capacity_c - 1)
      throw invalid_argument("soaheap: defragmentation factor n=" + std::to_string(factor) + " for class " +
                             class_name(class_index) + " is out of range: n must be in 1.." +
                             std::to_string(capacity_c - 1) + " (its block capacity is " + std::to_string(capacity_c) +
                             ")");
    const OperationGuard guard(*this, "set_defrag_factor");
    defrag_factor_[class_index] = factor;
    const int threshold = capacity_c * factor / (factor + 1);
    runtime_.copy_from_host(offsetof(detail::HeapRuntimeState, defrag_threshold) + class_index * sizeof(int), &threshold,
                            sizeof(int));
    executor_.run(block_count_, detail::RebuildCandidatesKernel<Internals>{make_internals(), class_index});
  }
  template <class T>
  void set_defrag_factor(int factor) {
    set_defrag_factor(class_id<T>, factor);
  }
  int defrag_factor(int class_index) const { return defrag_factor_[class_index]; }

  /// @brief Block ids in memory of the heap's backend (owned by the heap: valid until the next
  /// enumeration of the same bitmap).
  struct BlockList {
    std::uint32_t* id_array = nullptr;
    std::uint64_t count = 0;
    Backend backend = Backend::host;
    const std::uint32_t* ids() const { return id_array; }
    std::uint32_t* ids() { return id_array; }
    /// Id number @p index, read to the host.
    std::uint32_t id_at(std::uint64_t index) const {
      std::uint32_t id = 0;
      if (backend == Backend::host) return id_array[index];
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemcpy(&id, id_array + index, sizeof(id), cudaMemcpyDeviceToHost));
#endif
      return id;
    }
  };
  /// @brief Sorted ids of the blocks whose bit is set in bitmap @p bitmap_index (stream compaction
  /// into a buffer the heap keeps per bitmap; the count is read back, so this synchronizes).
  BlockList enumerate_blocks(int bitmap_index) const {
    ListBuffer& buffer = list_buffer(bitmap_index);
    BlockList list;
    list.id_array = buffer.ids.template as<std::uint32_t>();
    list.backend = options_.backend;
    const std::uint64_t* level0 = make_internals().bitmap(bitmap_index).words();
    if (options_.backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      std::uint64_t* selected = buffer.counters.template as<std::uint64_t>() + 2;
      const thrust::counting_iterator<std::uint32_t> indices(0);
      std::size_t temp_bytes = 0;
      SOAHEAP_CUDA_CHECK(cub::DeviceSelect::If(nullptr, temp_bytes, indices, list.ids(), selected,
                                                static_cast<std::int64_t>(block_count_), detail::BitIsSet{level0},
                                                executor_.stream));
      ensure_scratch(temp_bytes);
      SOAHEAP_CUDA_CHECK(cub::DeviceSelect::If(scratch_.get(), temp_bytes, indices, list.ids(), selected,
                                                static_cast<std::int64_t>(block_count_), detail::BitIsSet{level0},
                                                executor_.stream));
      buffer.counters.copy_to_host(&list.count, 2 * sizeof(std::uint64_t), sizeof(std::uint64_t));
#endif
    } else {
      std::uint32_t* out = list.ids();
      for (std::uint64_t w = 0; w < shape_.level_words[0]; ++w) {
        std::uint64_t bits = level0[w];
        while (bits != 0) {
          out[list.count++] = static_cast<std::uint32_t>(w * 64 + static_cast<std::uint64_t>(detail::lowest_set_bit(bits)));
          bits &= bits - 1;
        }
      }
    }
    return list;
  }

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

  /// Marks the heap busy for the duration of a bulk operation (refuses to nest).
  class OperationGuard {
   public:
    OperationGuard(const Heap& heap, const char* operation) : heap_(heap) {
      bool expected = false;
      if (!heap_.busy_.compare_exchange_strong(expected, true))
        throw usage_error(std::string("soaheap: ") + operation +
                          " refused: another parallel operation on this heap is in flight");
    }
    ~OperationGuard() { heap_.busy_.store(false); }
    OperationGuard(const OperationGuard&) = delete;
    OperationGuard& operator=(const OperationGuard&) = delete;

   private:
    const Heap& heap_;
  };

  /// A host copy of the heap's metadata (and, if requested, data) with a view over it.
  struct Snapshot {
    std::vector<BlockHeader> headers;
    std::vector<std::uint64_t> bitmap_words;
    detail::Memory data;            // host memory, 128-byte aligned
    detail::HeapRuntimeState state{};
    Internals view;  ///< the heap's internals over the copies
  };
  Snapshot take_snapshot(bool with_data) const {
    synchronize();
    Snapshot snapshot;
    snapshot.headers.resize(block_count_);
    headers_.copy_to_host(snapshot.headers.data(), 0, headers_.bytes());
    snapshot.bitmap_words.resize(bitmaps_.bytes() / sizeof(std::uint64_t));
    bitmaps_.copy_to_host(snapshot.bitmap_words.data(), 0, bitmaps_.bytes());
    runtime_.copy_to_host(&snapshot.state, 0, sizeof(snapshot.state));
    snapshot.state.error_signal = nullptr;  // host code over a copy signals nothing to the live heap
    snapshot.view = make_internals();
    snapshot.view.headers = snapshot.headers.data();
    snapshot.view.bitmap_words = snapshot.bitmap_words.data();
    snapshot.view.state = &snapshot.state;
    if (with_data) {
      if (options_.backend == Backend::host) {
        snapshot.view.data_base = reinterpret_cast<std::uint64_t>(data_.get());
      } else {
        snapshot.data = detail::Memory(Backend::host, data_.bytes());
        data_.copy_to_host(snapshot.data.get(), 0, data_.bytes());
        snapshot.view.data_base = reinterpret_cast<std::uint64_t>(snapshot.data.get());
      }
    }
    return snapshot;
  }

 private:
  Internals make_internals() const {
    Internals internals;
    internals.headers = headers_.as<BlockHeader>();
    internals.data_base = reinterpret_cast<std::uint64_t>(data_.get());
    internals.block_count = block_count_;
    internals.bitmap_words = bitmaps_.as<std::uint64_t>();
    internals.bitmap_shape = shape_;
    internals.state = runtime_.as<detail::HeapRuntimeState>();
    return internals;
  }
  /// parallel_do (Visited and its concrete subclasses) and parallel_do_exact (kExact: Visited only).
  /// The method kernels see the objects as T*: Visited or the base that declares Method.
  template <class T, class Visited, bool kExact, auto Method, class... Arguments>
  void run_parallel_do(const char* operation, const Arguments&... arguments) {
    const OperationGuard guard(*this, operation);
    constexpr int kTargets = kExact ? 1 : concrete_subclass_count<Visited>();
    if constexpr (kTargets > 0) {
      using Pack = decltype(detail::make_argument_pack(arguments...));
      const Pack pack = detail::make_argument_pack(arguments...);
      const View heap_view = view();
      const detail::EnumerationStamp stamp = next_enumeration_stamp();
      detail::EnumerateKernel<Internals, kTargets> enumerate{make_internals(), block_count_, {}, stamp};
      int target = 0;
      for_each_visited_class<Visited, kExact>([&](auto tag) {
        using C = detail::tag_type_t<decltype(tag)>;
        enumerate.targets[target++] = next_enumeration(class_id<C>);
      });
      const std::uint64_t enumeration_threads = static_cast<std::uint64_t>(kTargets) * decltype(enumerate)::threads_for(block_count_);
      enumeration_timer_.start(executor_);
      if constexpr (kTargets == 1) {
        // A list that was tiny last time: enumeration and method kernel as one cooperative grid
        // (one launch; Executor::launch_pair), the enumeration reading only the bitmap level above
        // the blocks where the list is expected to hold no more than a few blocks
        // (SparseEnumerateKernel). When timed, its enumeration part is (EnumerationStamp).
        bool launched = false;
        for_each_visited_class<Visited, kExact>([&](auto tag) {
          using C = detail::tag_type_t<decltype(tag)>;
          const detail::EnumerationTarget& list = enumerate.targets[0];
          const detail::LaunchHint& hint = list_buffer(1 + class_id<C>).launch_hint.hint();
          const detail::ParallelDoKernel<View, T, C, Method, Pack> method{heap_view, list.ids, list.snapshots, pack};
          if (detail::Executor::expected_items(hint, detail::LaunchHint::kUnknown) <= kSparseEnumerationItems) {
            launched = executor_.launch_pair(detail::SparseEnumerateKernel<Internals>::threads_for(block_count_),
                                             detail::SparseEnumerateKernel<Internals>{make_internals(), list, stamp}, list.count, capacity<C>, hint,
                                             method);
          } else {
            launched = executor_.launch_pair(enumeration_threads, enumerate, list.count, capacity<C>, hint, method);
          }
        });
        if (launched) {
          enumeration_timer_.stop(executor_);
          return;
        }
      }
      executor_.launch(enumeration_threads, enumerate);
      enumeration_timer_.stop(executor_);
      if constexpr (kTargets > 1) {
        // Lists of a hierarchy that together held fewer than kHierarchyLaunchMaxItems objects the
        // last time (or whose size is not known yet): one method launch for all its classes
        // instead of one per class (structure's BFS passes over NodeBase, three classes of which
        // two are tiny: 9.69 -> 9.58 s on an H100).
        detail::LaunchHintWord& hint_word = hierarchy_hints_[class_id<Visited>];
        if (hint_word.hint().host == nullptr) hint_word = detail::LaunchHintWord(options_.backend);
        const detail::LaunchHint& hint = hint_word.hint();
        const std::uint64_t expected = hint.host == nullptr ? 0 : *static_cast<const volatile std::uint64_t*>(hint.host);
        if (expected == detail::LaunchHint::kUnknown || expected < kHierarchyLaunchMaxItems) {
          const auto lists = concatenate<T, Visited, Method, Pack, Classes...>(heap_view, enumerate.targets, pack);
          executor_.launch_summed(block_count_ * detail::kSlotsPerBlock, hint, lists);
          return;
        }
      }
      target = 0;
      for_each_visited_class<Visited, kExact>([&](auto tag) {
        using C = detail::tag_type_t<decltype(tag)>;
        const detail::EnumerationTarget& list = enumerate.targets[target++];
        executor_.template launch_counted<kParallelDoRows>(
            list.count, capacity<C>, block_count_ * capacity<C>, list_buffer(1 + class_id<C>).launch_hint.hint(),
            detail::ParallelDoKernel<View, T, C, Method, Pack>{heap_view, list.ids, list.snapshots, pack});
      });
    }
  }

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

  static std::uint64_t block_count_for(const HeapOptions& options) {
    if ((options.bytes == 0) == (options.objects == 0))
      throw invalid_argument("soaheap: give exactly one heap size: bytes=" + std::to_string(options.bytes) +
                             ", objects=" + std::to_string(options.objects));
    std::uint64_t blocks = 0;
    if (options.objects != 0) {
      blocks = (options.objects + detail::kSlotsPerBlock - 1) / detail::kSlotsPerBlock;
    } else {
      // Per block: its data segment, its header, and one bit in each bitmap (plus the upper levels).
      const double per_block = static_cast<double>(Layout::kDataBytes + sizeof(BlockHeader)) +
                               Internals::kBitmapCount / 8.0 * (64.0 / 63.0);
      blocks = static_cast<std::uint64_t>(static_cast<double>(options.bytes) / per_block);
      // Bitmap levels round up to whole words per bitmap; with many bitmaps that can add a block's worth.
      while (blocks > 1 && blocks * (Layout::kDataBytes + sizeof(BlockHeader)) +
                                   Internals::kBitmapCount * BitmapShape::for_bits(blocks).total_words * sizeof(std::uint64_t) >
                               options.bytes)
        --blocks;
      if (blocks == 0)
        throw invalid_argument("soaheap: heap size bytes=" + std::to_string(options.bytes) +
                               " is smaller than one block (" + std::to_string(Layout::kDataBytes) + " bytes of data)");
    }
    if (blocks > 0xffffffffull)
      throw invalid_argument("soaheap: heap too large: " + std::to_string(blocks) + " blocks (at most 2^32 - 1)");
    return blocks;
  }

  /// A managed heap must fit into the GPU's free memory: over-subscribed managed memory would page
  /// between host and GPU inside every kernel instead of failing.
  static void refuse_oversubscription(std::uint64_t bytes) {
#if SOAHEAP_HAS_CUDA
    std::size_t free_bytes = 0, total_bytes = 0;
    SOAHEAP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    if (bytes > free_bytes)
      throw out_of_memory("soaheap: a managed heap of " + std::to_string(bytes) + " bytes is larger than the GPU's free memory (" +
                          std::to_string(free_bytes) + " of " + std::to_string(total_bytes) +
                          " bytes); managed heaps are never over-subscribed: use a smaller size or HeapMemory::device");
#else
    (void)bytes;
#endif
  }

  void check_address_space() const {
    const auto begin = reinterpret_cast<std::uint64_t>(data_.get());
    const std::uint64_t end = begin + data_.bytes();
    if (end > (std::uint64_t{1} << detail::kAddressBits) || begin % detail::kObjectAlignment != 0) {
      std::ostringstream message;
      message << "soaheap: the heap's memory [0x" << std::hex << begin << ", 0x" << end << ") does not fit into "
              << std::dec << detail::kAddressBits
              << "-bit addresses, so the high bits that object pointers use for slot, capacity and class are not "
                 "free on this system";
      throw error(message.str());
    }
  }

  void initialize() {
    executor_.run(block_count_, detail::InitializeHeadersKernel<Internals>{make_internals()});
    std::vector<std::uint64_t> words(bitmaps_.bytes() / sizeof(std::uint64_t), 0);
    // The free bitmap (index 0) starts full: bits [0, M) at level 0 and the matching upper levels.
    std::uint64_t bits = block_count_;
    for (int level = 0; level < shape_.level_count; ++level) {
      for (std::uint64_t w = 0; w < shape_.level_words[level]; ++w) {
        const std::uint64_t first = w * 64;
        const std::uint64_t in_word = bits > first ? (bits - first < 64 ? bits - first : 64) : 0;
        words[shape_.level_offset[level] + w] = detail::low_bits(static_cast<int>(in_word));
      }
      bits = shape_.level_words[level];
    }
    bitmaps_.copy_from_host(0, words.data(), words.size() * sizeof(std::uint64_t));
    detail::HeapRuntimeState state{};
    for (int c = 0; c < kClassCount; ++c) {
      defrag_factor_[c] = 1;
      state.defrag_threshold[c] = capacity_of_class(c) / 2;  // n = 1
    }
    state.contended_rounds = options_.pack_allocations ? detail::kPackedContendedRounds : 0;
    state.error_signal = error_signal_.device();
    runtime_.copy_from_host(0, &state, sizeof(state));
  }

  void require_host_backend(const char* what) const {
    if (options_.backend != Backend::host)
      throw usage_error(std::string("soaheap: ") + what + " needs the host backend; on cuda use heap.view() in a kernel");
  }

  void ensure_scratch(std::size_t bytes) const {
    if (scratch_.bytes() < bytes) scratch_ = detail::Memory(options_.backend, bytes);
  }

  /// Block-id storage of one bitmap, made on its first enumeration and reused ever after.
  /// counters: [0] and [1] alternate as the count of parallel_do enumerations (each zeroes the one
  /// the next will use, so no separate reset is needed), [2] receives stream compaction counts.
  struct ListBuffer {
    detail::Memory ids;
    detail::Memory snapshots;  ///< parallel_do's iteration snapshots, one per listed block (made on first use)
    detail::Memory counters;
    detail::LaunchHintWord launch_hint;  ///< threads of the last parallel_do over this list
    int parity = 0;
  };
  ListBuffer& list_buffer(int bitmap_index) const {
    ListBuffer& buffer = block_lists_[bitmap_index];
    if (buffer.ids.get() == nullptr) {
      buffer.ids = detail::Memory(options_.backend, (block_count_ + 1) * sizeof(std::uint32_t));
      buffer.counters = detail::Memory(options_.backend, 3 * sizeof(std::uint64_t));
      buffer.counters.fill_zero();
      buffer.launch_hint = detail::LaunchHintWord(options_.backend);
    }
    return buffer;
  }
  /// The list an EnumerateKernel fills for the allocated blocks of @p class_index.
  detail::EnumerationTarget next_enumeration(int class_index) const {
    ListBuffer& buffer = list_buffer(1 + class_index);
    std::uint64_t* counters = buffer.counters.template as<std::uint64_t>();
    if (buffer.snapshots.get() == nullptr) buffer.snapshots = detail::Memory(options_.backend, (block_count_ + 1) * sizeof(std::uint64_t));
    const detail::EnumerationTarget target{class_index,
                                           Internals::full_mask(class_index),
                                           buffer.ids.template as<std::uint32_t>(),
                                           buffer.snapshots.template as<std::uint64_t>(),
                                           counters + buffer.parity,
                                           counters + (1 - buffer.parity)};
    buffer.parity = 1 - buffer.parity;
    return target;
  }

  /// The clock the next enumeration launch stamps: none unless timed on cuda; its two intervals in
  /// turn (EnumerationClock).
  detail::EnumerationStamp next_enumeration_stamp() const {
    if (!options_.time_enumeration || options_.backend != Backend::cuda) return {};
    auto* clock = reinterpret_cast<detail::EnumerationClock*>(static_cast<char*>(runtime_.get()) +
                                                              offsetof(detail::HeapRuntimeState, enumeration_clock));
    enumeration_slot_ = 1 - enumeration_slot_;
    return {clock, enumeration_slot_};
  }

  std::uint64_t read_runtime_counter(std::size_t offset) const {
    synchronize();
    std::uint64_t value = 0;
    runtime_.copy_to_host(&value, offset, sizeof(value));
    return value;
  }

  HeapOptions options_;
  std::uint64_t block_count_ = 0;
  BitmapShape shape_{};
  std::unique_ptr<detail::ThreadPool> pool_;
  detail::Executor executor_;
  detail::Memory data_;
  detail::Memory headers_;
  detail::Memory bitmaps_;
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

#include <soaheap/core/detail/validate.hpp>
