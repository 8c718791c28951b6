#pragma once
/// @file heap.inl
/// @brief Definitions of Heap's longer members (heap.cuh declares them with their documentation):
///        construction and sizing, error decoding, statistics, enumeration and parallel_do's launches.
/// Included at the end of heap.cuh; not a header of its own.

namespace soaheap {

namespace detail {
/// @p options with a heap given no size made one that sizes itself (HeapOptions).
inline HeapOptions sized_options(HeapOptions options) {
  if (options.bytes == 0 && options.objects == 0 && options.memory != HeapMemory::managed) {
    if (options.max_bytes == 0) options.max_bytes = HeapOptions::kAllMemory;
    options.bytes = options.max_bytes == HeapOptions::kAllMemory
                        ? HeapOptions::kGrowingStartBytes
                        : std::min(HeapOptions::kGrowingStartBytes, options.max_bytes / 2);  // room to grow
  }
  return options;
}
}  // namespace detail

template <class... Classes>
Heap<Classes...>::Heap(const HeapOptions& options) : options_(detail::sized_options(options)) {
  const std::uint64_t initial_blocks = block_count_for(options_);
  executor_.backend = options.backend;
  if (options.backend == Backend::host) {
    pool_ = std::make_unique<detail::ThreadPool>(detail::host_thread_count(options.host_threads));
    executor_.pool = pool_.get();
  } else if (!cuda_available()) {
    throw usage_error("soaheap: the cuda backend needs a CUDA GPU, and none is available" +
                      std::string(SOAHEAP_HAS_CUDA ? "" : " (this translation unit was compiled without nvcc)"));
  } else {
    detail::load_preloaded_kernels();  // before any kernel of the heap runs (detail/kernel_preload.cuh)
  }
  make_storage(initial_blocks);
  runtime_ = detail::Memory(options.backend, sizeof(detail::HeapRuntimeState), managed());
  error_signal_ = detail::MappedWord(options.backend, 0);
  statistics_counters_ = detail::Memory(options.backend, (kClassCount * detail::StatisticsKernel<Internals>::kCounters +
                                                          detail::UntypedStatisticsKernel<Internals>::kCounters) *
                                                             sizeof(std::uint64_t));
  block_lists_.resize(Internals::kBitmapCount);
  // cuda times the enumerations on the device (EnumerationStamp), the host backend by its clock.
  enumeration_timer_.enabled = options.time_enumeration && options.backend == Backend::host;
  check_address_space();
  initialize();
}

template <class... Classes>
double Heap<Classes...>::enumeration_seconds() const {
  if (options_.backend == Backend::host) return enumeration_timer_.seconds(executor_);
  if (!options_.time_enumeration) return 0;
  executor_.synchronize();
  detail::EnumerationClock clock{};
  runtime_.copy_to_host(&clock, offsetof(detail::HeapRuntimeState, enumeration_clock), sizeof(clock));
  return static_cast<double>(clock.total_nanoseconds()) * 1e-9;
}

template <class... Classes>
detail::EnumerationStamp Heap<Classes...>::next_enumeration_stamp() const {
  if (!options_.time_enumeration || options_.backend != Backend::cuda) return {};
  auto* clock = reinterpret_cast<detail::EnumerationClock*>(static_cast<char*>(runtime_.get()) +
                                                            offsetof(detail::HeapRuntimeState, enumeration_clock));
  enumeration_slot_ = 1 - enumeration_slot_;
  return {clock, enumeration_slot_};
}

template <class... Classes>
template <class T, class Function>
void Heap<Classes...>::for_each_writable(Function&& fn) {
  const OperationGuard guard(*this, "for_each_writable");
  if (managed()) {  // in place: the writes are the heap's
    synchronize();
    view().template for_each_object<T>([&](T* object) { fn(object); });
    return;
  }
  const Snapshot snapshot = take_snapshot(true);
  snapshot.view.template for_each_object<T>([&](T* object) { fn(object); });
  if (options_.backend == Backend::cuda) data_.copy_from_host(0, snapshot.data.get(), data_.committed_bytes());
}

template <class... Classes>
void Heap<Classes...>::synchronize() const {
  executor_.synchronize();
  if (grower_ != nullptr && mapped_blocks_.load() > published_host_) {  // grown while kernels ran
    publish_grown_blocks();
    executor_.synchronize();
  }
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

template <class... Classes>
HeapStats Heap<Classes...>::stats() const {
  synchronize();
  constexpr int kCounters = detail::StatisticsKernel<Internals>::kCounters;
  constexpr int kTypedCounters = kClassCount * kCounters;
  // Objects' and untyped memory's counts: two launches, one wait, one copy.
  detail::Memory& counters = statistics_counters_;
  counters.fill_zero();
  const std::uint64_t threads = detail::block_counting_threads(block_count_);
  executor_.launch(threads, detail::StatisticsKernel<Internals>{make_internals(), counters.as<std::uint64_t>()});
  executor_.launch(threads, detail::UntypedStatisticsKernel<Internals>{make_internals(), counters.as<std::uint64_t>() + kTypedCounters});
  executor_.synchronize();
  std::vector<std::uint64_t> values(counters.bytes() / sizeof(std::uint64_t));
  counters.copy_to_host(values.data(), 0, counters.bytes());
  HeapStats result;
  result.block_count = block_count_;
  // What the counting kernel saw: the grower may have mapped blocks since that no one published.
  result.mapped_blocks = read_runtime_counter(offsetof(detail::HeapRuntimeState, published_blocks));
  result.block_bytes = Layout::kDataBytes;
  {
    std::unique_lock<std::mutex> lock;  // the grower thread may be mapping
    if (grower_ != nullptr) lock = std::unique_lock<std::mutex>(grower_->mutex());
    result.resident_bytes = result.heap_bytes = resident_bytes_locked();
    result.metadata_bytes = result.resident_bytes - data_.resident_bytes();
  }
  result.scratch_bytes = scratch_bytes();
  result.max_bytes = max_bytes_;
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
  result.untyped = detail::untyped_stats_from(make_internals(), values.data() + kTypedCounters, runtime_);
  result.free_blocks = result.mapped_blocks - allocated - result.untyped.blocks();
  return result;
}

template <class... Classes>
void Heap<Classes...>::throw_recorded_error() const {
  std::uint64_t encoded = 0;
  runtime_.copy_to_host(&encoded, offsetof(detail::HeapRuntimeState, error), sizeof(encoded));
  if (encoded == 0) return;
  const std::uint64_t zero = 0;
  const_cast<detail::Memory&>(runtime_).copy_from_host(offsetof(detail::HeapRuntimeState, error), &zero, sizeof(zero));
  const auto kind = static_cast<HeapErrorKind>(encoded & 0xff);
  const int class_index = static_cast<int>((encoded >> 8) & 0xff);
  const std::uint64_t block = encoded >> 16;
  if (detail::is_untyped_error(kind))
    detail::throw_untyped_error(kind, block, mapped_blocks_.load(), heap_bytes(), Layout::kDataBytes, growth_summary());
  const std::string name = class_index < kClassCount ? class_name(class_index) : std::string("<unknown class>");
  std::ostringstream message;
  message << "soaheap: ";
  switch (kind) {
    case HeapErrorKind::out_of_memory:
    case HeapErrorKind::allocation_starved:
      message << "out of memory while allocating " << name << ": all " << mapped_blocks_.load() << " blocks of the "
              << heap_bytes() << "-byte heap are in use"
              << (kind == HeapErrorKind::allocation_starved ? " or contended beyond the retry limit" : "")
              << occupancy_summary() << "; new returned nullptr. " << growth_summary();
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

template <class... Classes>
std::string Heap<Classes...>::growth_summary() const {
  if (grower_ == nullptr) return "Free objects or create a larger heap (or let it grow: HeapOptions::max_bytes)";
  detail::GrowthRefusal refusal = grower_->refusal();
  const std::uint64_t mapped = mapped_blocks_.load();
  if (refusal == detail::GrowthRefusal::none && mapped >= max_blocks_) refusal = detail::GrowthRefusal::max_bytes;
  if (refusal == detail::GrowthRefusal::none && mapped >= block_count_) refusal = detail::GrowthRefusal::capacity;
  switch (refusal) {
    case detail::GrowthRefusal::max_bytes:
      return "The heap could not grow: it reached max_bytes=" + std::to_string(max_bytes_) +
             ". Free objects or give a larger max_bytes";
    case detail::GrowthRefusal::device_memory:
      return std::string("The heap could not grow: the ") + (options_.backend == Backend::cuda ? "GPU" : "system") +
             " has no free memory left (max_bytes=" + std::to_string(max_bytes_) + " not reached). Free memory";
    case detail::GrowthRefusal::capacity:
      return "The heap could not grow further inside one kernel: a kernel may grow it to " +
             std::to_string(block_count_) + " blocks, growth_headroom=" + std::to_string(options_.growth_headroom) +
             " times what was mapped when it was launched (or three quarters of that below a power of 64). "
             "Create objects in smaller launches, reserve_blocks() first or raise HeapOptions::growth_headroom";
    case detail::GrowthRefusal::no_answer:
      return "The heap could not grow: a kernel waited " + std::to_string(detail::kGrowthWaitNanoseconds / 1000000000) +
             " s for the host to map memory: the heap's grower thread got no answer from the driver. "
             "reserve_blocks() before the launch avoids growing inside it";
    default:
      return "The heap could not grow in time (no answer from the host within " +
             std::to_string(detail::kGrowthWaitNanoseconds / 1000000000) + " s)";
  }
}

template <class... Classes>
std::string Heap<Classes...>::occupancy_summary() const {
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

template <class... Classes>
void Heap<Classes...>::set_defrag_factor(int class_index, int factor) {
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

template <class... Classes>
typename Heap<Classes...>::BlockList Heap<Classes...>::enumerate_blocks(int bitmap_index) const {
  ListBuffer& buffer = list_buffer(bitmap_index);
  BlockList list;
  list.id_array = buffer.ids.template as<std::uint32_t>();
  list.backend = options_.backend;
  const BitmapView bitmap = make_internals().bitmap(bitmap_index);
  if (options_.backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
    std::uint64_t* selected = buffer.counters.template as<std::uint64_t>() + 2;
    const thrust::counting_iterator<std::uint32_t> indices(0);
    std::size_t temp_bytes = 0;
    SOAHEAP_CUDA_CHECK(cub::DeviceSelect::If(nullptr, temp_bytes, indices, list.ids(), selected,
                                              static_cast<std::int64_t>(block_count_), detail::BitIsSet{bitmap},
                                              executor_.stream));
    ensure_scratch(temp_bytes);
    SOAHEAP_CUDA_CHECK(cub::DeviceSelect::If(scratch_.get(), temp_bytes, indices, list.ids(), selected,
                                              static_cast<std::int64_t>(block_count_), detail::BitIsSet{bitmap},
                                              executor_.stream));
    buffer.counters.copy_to_host(&list.count, 2 * sizeof(std::uint64_t), sizeof(std::uint64_t));
#endif
  } else {
    std::uint32_t* out = list.ids();
    for (std::uint64_t w = 0; w < (block_count_ + 63) / 64; ++w) {
      std::uint64_t bits = *bitmap.level0_word(w);
      while (bits != 0) {
        out[list.count++] = static_cast<std::uint32_t>(w * 64 + static_cast<std::uint64_t>(detail::lowest_set_bit(bits)));
        bits &= bits - 1;
      }
    }
  }
  return list;
}

template <class... Classes>
typename Heap<Classes...>::Snapshot Heap<Classes...>::take_snapshot(bool with_data) const {
  synchronize();
  Snapshot snapshot;
  snapshot.headers.resize(block_count_);
  headers_.copy_to_host(snapshot.headers.data(), 0, block_count_ * sizeof(BlockHeader));
  // The bitmaps of the blocks that exist, level by level: shaped for block_count_ blocks on the
  // host (the heap's own are shaped for its whole reservation).
  snapshot.shape = BitmapShape::for_bits(block_count_);
  constexpr std::uint64_t kStride = Internals::kBitmapCount;
  snapshot.bitmap_words.resize(snapshot.shape.total_words * kStride);
  for (int level = 0; level < snapshot.shape.level_count; ++level)
    bitmaps_.copy_to_host(snapshot.bitmap_words.data() + snapshot.shape.level_offset[level] * kStride,
                          shape_.level_offset[level] * kStride * sizeof(std::uint64_t),
                          snapshot.shape.level_words[level] * kStride * sizeof(std::uint64_t));
  runtime_.copy_to_host(&snapshot.state, 0, sizeof(snapshot.state));
  snapshot.state.error_signal = nullptr;  // host code over a copy signals nothing to the live heap
  snapshot.view = make_internals();
  snapshot.view.headers = snapshot.headers.data();
  snapshot.view.bitmap_words = snapshot.bitmap_words.data();
  snapshot.view.bitmap_shape = snapshot.shape;
  snapshot.view.state = &snapshot.state;
  if (with_data) {
    if (options_.backend == Backend::host) {
      snapshot.view.data_base = reinterpret_cast<std::uint64_t>(data_.get());
    } else {
      snapshot.data = detail::Memory(Backend::host, data_.committed_bytes());
      data_.copy_to_host(snapshot.data.get(), 0, data_.committed_bytes());
      snapshot.view.data_base = reinterpret_cast<std::uint64_t>(snapshot.data.get());
    }
  }
  return snapshot;
}

template <class... Classes>
template <class T, class Visited, bool kExact, auto Method, class... Arguments>
void Heap<Classes...>::run_parallel_do(const char* operation, const Arguments&... arguments) {
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

template <class... Classes>
std::uint64_t Heap<Classes...>::block_count_for(const HeapOptions& options) {
  if (options.bytes == 0 && options.objects == 0)  // only a managed heap gets here unsized
    throw invalid_argument("soaheap: a managed heap cannot grow, so it needs a size: give bytes or objects");
  if (options.bytes != 0 && options.objects != 0)
    throw invalid_argument("soaheap: give at most one heap size: bytes=" + std::to_string(options.bytes) +
                           ", objects=" + std::to_string(options.objects));
  std::uint64_t blocks = 0;
  if (options.objects != 0) {
    blocks = (options.objects + detail::kSlotsPerBlock - 1) / detail::kSlotsPerBlock;
  } else {
    blocks = blocks_for_bytes(options.bytes);
    if (blocks == 0)
      throw invalid_argument("soaheap: heap size bytes=" + std::to_string(options.bytes) +
                             " is smaller than one block (" + std::to_string(Layout::kDataBytes) + " bytes of data)");
  }
  if (blocks > detail::kMaxBlocks)
    throw invalid_argument("soaheap: heap too large: " + std::to_string(blocks) + " blocks (at most 2^32 - 1)");
  return blocks;
}

template <class... Classes>
void Heap<Classes...>::refuse_oversubscription(std::uint64_t bytes) {
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

template <class... Classes>
void Heap<Classes...>::check_address_space() const {
  const auto begin = reinterpret_cast<std::uint64_t>(data_.get());
  const std::uint64_t end = begin + data_.reserved_bytes();
  if (end > (std::uint64_t{1} << detail::kAddressBits) || begin % detail::kObjectAlignment != 0) {
    std::ostringstream message;
    message << "soaheap: the heap's memory [0x" << std::hex << begin << ", 0x" << end << ") does not fit into "
            << std::dec << detail::kAddressBits
            << "-bit addresses, so the high bits that object pointers use for slot, capacity and class are not "
               "free on this system";
    throw error(message.str());
  }
}

template <class... Classes>
void Heap<Classes...>::initialize() {
  executor_.run(block_count_, detail::InitializeHeadersKernel<Internals>{make_internals()});
  // Bitmaps start empty, then the free bitmap (index 0) gets the mapped blocks: a fixed heap's
  // level 0 by copy and the levels above by a kernel, a growable heap's like any growth.
  if (!bitmaps_.growable()) bitmaps_.fill_byte(0, bitmaps_.reserved_bytes(), 0);
  if (grower_ == nullptr) write_free_words(mapped_blocks_.load());
  detail::HeapRuntimeState state{};
  for (int c = 0; c < kClassCount; ++c) {
    defrag_factor_[c] = 1;
    state.defrag_threshold[c] = capacity_of_class(c) / 2;  // n = 1
  }
  state.contended_rounds = options_.pack_allocations ? detail::kPackedContendedRounds : 0;
  state.error_signal = error_signal_.device();
  state.growth = grower_ ? grower_->device_channel() : nullptr;
  state.block_limit = block_count_;
  state.lowest_first = growable() ? 1 : 0;
  runtime_.copy_from_host(0, &state, sizeof(state));
  published_host_ = 0;
  const std::uint64_t mapped = mapped_blocks_.load();
  if (grower_ == nullptr) {
    executor_.run((mapped + 63) / 64, detail::PublishFreeBlocksKernel<Internals>{make_internals(), mapped});
    published_host_ = mapped;
  } else {
    publish_grown_blocks();
  }
  executor_.synchronize();
}

template <class... Classes>
typename Heap<Classes...>::ListBuffer& Heap<Classes...>::list_buffer(int bitmap_index) const {
  ListBuffer& buffer = block_lists_[bitmap_index];
  if (buffer.ids.get() == nullptr) {
    buffer.blocks = block_count_;
    buffer.ids = detail::Memory(options_.backend, (block_count_ + 1) * sizeof(std::uint32_t));
    buffer.counters = detail::Memory(options_.backend, 3 * sizeof(std::uint64_t));
    buffer.counters.fill_zero();
    buffer.launch_hint = detail::LaunchHintWord(options_.backend);
  }
  return buffer;
}

template <class... Classes>
detail::EnumerationTarget Heap<Classes...>::next_enumeration(int class_index) const {
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

}  // namespace soaheap
