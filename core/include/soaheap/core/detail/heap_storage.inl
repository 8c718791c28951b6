/// @file heap_storage.inl
/// @brief Definitions of Heap's storage members (heap.cuh declares them): a fixed heap's three
///        buffers, or a growable heap's reserved ranges, their growth while kernels run
///        (heap_growth.cuh) and the release of free memory at their end.
/// Included at the end of heap.cuh; not a header of its own.
///
/// A growable heap has three counts of blocks: max_blocks_ (the reservation, what the bitmaps are
/// shaped for), block_count_ (blocks whose headers and bitmap words are mapped: what kernels index
/// and the most a running kernel can grow to) and mapped_blocks_ (blocks with data memory and their
/// free bits set). block_count_ stays at least twice mapped_blocks_ (keep_growth_headroom; 1.5
/// times where that saves a bitmap level), so a kernel can double the heap; it changes only between
/// kernels, by an eighth at a time, and a release of free memory lowers it with the mapped blocks.

namespace soaheap {

namespace detail {
inline std::uint64_t round_up(std::uint64_t value, std::uint64_t unit) { return (value + unit - 1) / unit * unit; }

/// The largest power of 64 (64 at least) not above @p blocks: what a bitmap of one level fewer covers.
inline std::uint64_t level_capacity_below(std::uint64_t blocks) {
  std::uint64_t level = 64;
  while (level <= blocks / 64) level *= 64;
  return level;
}

/// Memory of the device a heap is on (cuda) or of the machine (host): what max_bytes defaults to.
inline std::uint64_t memory_of(Backend backend) {
  if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
    std::size_t free_bytes = 0, total_bytes = 0;
    SOAHEAP_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return total_bytes;
#endif
  }
  return static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}
}  // namespace detail

template <class... Classes>
std::uint64_t Heap<Classes...>::blocks_for_bytes(std::uint64_t bytes) {
  // Per block: its data segment, its header, and one bit in each bitmap (plus the upper levels).
  const double per_block = static_cast<double>(Layout::kDataBytes + sizeof(BlockHeader)) +
                           Internals::kBitmapCount / 8.0 * (64.0 / 63.0);
  std::uint64_t blocks = static_cast<std::uint64_t>(static_cast<double>(bytes) / per_block);
  // Bitmap levels round up to whole words per bitmap; with many bitmaps that can add a block's worth.
  while (blocks > 1 && blocks * (Layout::kDataBytes + sizeof(BlockHeader)) +
                               Internals::kBitmapCount * BitmapShape::for_bits(blocks).total_words * sizeof(std::uint64_t) >
                           bytes)
    --blocks;
  return blocks;
}

template <class... Classes>
void Heap<Classes...>::make_storage(std::uint64_t initial_blocks) {
  const Backend backend = options_.backend;
  std::uint64_t max_blocks = initial_blocks;
  const bool whole_memory = options_.max_bytes == HeapOptions::kAllMemory;
  if (options_.max_bytes != 0 && managed())
    throw usage_error("soaheap: a managed heap cannot grow (max_bytes=" + std::to_string(options_.max_bytes) +
                      "); give max_bytes = 0 or use HeapMemory::device");
  if (whole_memory && !detail::virtual_memory_supported(backend)) {
    // "Grow if you can" on a GPU or driver without virtual memory management: the heap as asked
    // for, fixed, and one warning. An explicit max_bytes is refused instead (ReservedRange).
    log::warn("soaheap: this GPU has no virtual memory management; the heap keeps its initial size of ",
              initial_blocks, " blocks (max_bytes = kAllMemory ignored)");
  } else if (options_.max_bytes != 0) {
    const std::uint64_t memory = detail::memory_of(backend);
    if (!whole_memory && options_.max_bytes > memory)
      throw invalid_argument("soaheap: max_bytes=" + std::to_string(options_.max_bytes) + " is more than the " +
                             std::string(backend == Backend::cuda ? "GPU's" : "machine's") + " memory (" +
                             std::to_string(memory) + " bytes)");
    // Mapping rounds up to whole chunks: headers, each bitmap level and the data may each map up to
    // one chunk more than they use, which max_bytes must hold too.
    const std::uint64_t unit = detail::ReservedRange::granularity(backend);
    const std::uint64_t limit = whole_memory ? memory : options_.max_bytes;
    const int levels = BitmapShape::for_bits(std::max<std::uint64_t>(blocks_for_bytes(limit), 1)).level_count;
    const std::uint64_t rounding = static_cast<std::uint64_t>(levels + 1) * unit + detail::round_up(64 * Layout::kDataBytes, unit);
    max_blocks = limit > rounding ? blocks_for_bytes(limit - rounding) : 0;
    max_blocks = std::min(max_blocks, detail::kMaxBlocks);
    if (max_blocks < initial_blocks)
      throw invalid_argument("soaheap: max_bytes=" + std::to_string(options_.max_bytes) +
                             " is smaller than the heap's initial size (bytes=" + std::to_string(options_.bytes) +
                             ", objects=" + std::to_string(options_.objects) + ": " + std::to_string(initial_blocks) +
                             " blocks, and up to " + std::to_string(rounding) + " bytes of chunk rounding)");
  }
  if (max_blocks == initial_blocks) {  // a fixed heap: one allocation each, no virtual-memory calls
    block_count_ = max_blocks_ = initial_blocks;
    mapped_blocks_ = initial_blocks;
    shape_ = BitmapShape::for_bits(block_count_);
    const std::uint64_t data_bytes = block_count_ * Layout::kDataBytes;
    const std::uint64_t header_bytes = block_count_ * sizeof(BlockHeader);
    const std::uint64_t bitmap_bytes = Internals::kBitmapCount * shape_.total_words * sizeof(std::uint64_t);
    if (managed()) refuse_oversubscription(data_bytes + header_bytes + bitmap_bytes);
    data_ = detail::GrowableMemory::fixed(backend, data_bytes, managed());
    headers_ = detail::GrowableMemory::fixed(backend, header_bytes, managed());
    bitmaps_ = detail::GrowableMemory::fixed(backend, bitmap_bytes, managed());
    max_bytes_ = resident_bytes();
    return;
  }
  max_blocks_ = max_blocks;
  max_bytes_ = options_.max_bytes == HeapOptions::kAllMemory ? detail::memory_of(backend) : options_.max_bytes;
  shape_ = BitmapShape::for_bits(max_blocks_);
  const std::uint64_t mapped = std::min(max_blocks_, detail::round_up(initial_blocks, 64));
  // Data in chunks of 64 blocks (the device's granularity, 2 MiB, where that is more), headers and
  // bitmaps in the smallest chunks; each mapped in pieces of up to 16 chunks, one allocation each
  // (on an H200 1 GiB maps in 24 ms as 2 MiB allocations, in 1.8 ms as 32 MiB ones), which trim
  // gives back whole.
  constexpr std::uint64_t kPieceChunks = 16;
  data_ = detail::GrowableMemory::reserved(backend, max_blocks_ * Layout::kDataBytes, 64 * Layout::kDataBytes, kPieceChunks);
  headers_ = detail::GrowableMemory::reserved(backend, max_blocks_ * sizeof(BlockHeader), 1, kPieceChunks);
  bitmaps_ = detail::GrowableMemory::reserved(backend, Internals::kBitmapCount * shape_.total_words * sizeof(std::uint64_t), 1,
                                              kPieceChunks);
  if (options_.growth_headroom < 2 || options_.growth_headroom > 64)
    throw invalid_argument("soaheap: growth_headroom=" + std::to_string(options_.growth_headroom) + " is outside 2..64");
  const std::uint64_t capacity = headroom_capacity(mapped);
  if (!data_.ensure(mapped * Layout::kDataBytes) || !commit_metadata(capacity))
    throw out_of_memory("soaheap: mapping the initial " + std::to_string(mapped) + " blocks of a growable heap failed");
  block_count_ = capacity;
  growth_limit_ = capacity;
  mapped_blocks_ = mapped;
  initial_mapped_blocks_ = mapped;
  grower_ = std::make_unique<detail::HeapGrower>(backend, mapped,
                                                 [this](std::uint64_t target) { return map_blocks(target); });
}

template <class... Classes>
std::uint64_t Heap<Classes...>::resident_bytes() const {
  // The grower thread may be mapping: read the ranges under its lock.
  std::unique_lock<std::mutex> lock;
  if (grower_ != nullptr) lock = std::unique_lock<std::mutex>(grower_->mutex());
  return resident_bytes_locked();
}

template <class... Classes>
std::uint64_t Heap<Classes...>::scratch_bytes() const {
  std::uint64_t bytes = scratch_.bytes() + statistics_counters_.bytes();
  for (const ListBuffer& buffer : block_lists_)
    bytes += buffer.ids.bytes() + buffer.snapshots.bytes() + buffer.counters.bytes();
  return bytes;
}

template <class... Classes>
template <class F>
bool Heap<Classes...>::for_each_bitmap_range(std::uint64_t from, std::uint64_t to, F&& range) const {
  constexpr std::uint64_t kStrideBytes = Internals::kBitmapCount * sizeof(std::uint64_t);
  for (int level = 0; level < shape_.level_count; ++level) {
    from = (from + 63) / 64;  // the words of this level that hold the bits below it
    to = (to + 63) / 64;
    if (!range((shape_.level_offset[level] + from) * kStrideBytes, (shape_.level_offset[level] + to) * kStrideBytes))
      return false;
  }
  return true;
}

template <class... Classes>
bool Heap<Classes...>::commit_metadata(std::uint64_t blocks) {
  if (!headers_.ensure(blocks * sizeof(BlockHeader))) return false;
  return for_each_bitmap_range(0, blocks, [this](std::uint64_t begin, std::uint64_t end) {
    return bitmaps_.ensure_range(begin, end, true);
  });
}

template <class... Classes>
void Heap<Classes...>::release_metadata_above(std::uint64_t blocks) {
  headers_.release_above(blocks * sizeof(BlockHeader));
  // Every bit of the blocks above is clear (they are free and unmapped), so the words are too; a
  // later commit_metadata maps them zeroed again.
  for_each_bitmap_range(blocks, block_count_, [this](std::uint64_t begin, std::uint64_t end) {
    bitmaps_.release_range(begin, end);
    return true;
  });
}

template <class... Classes>
void Heap<Classes...>::extend_capacity(std::uint64_t blocks) {
  if (blocks <= block_count_ || block_count_ >= max_blocks_) return;
  synchronize();
  std::lock_guard<std::mutex> lock(grower_->mutex());
  // An eighth more at a time: doubling held headers and bitmap words for up to four times the
  // mapped blocks at a growing heap's peak (generation: ~60 bytes per 512-byte block).
  std::uint64_t capacity = std::min(max_blocks_, detail::round_up(std::max(blocks, block_count_ + block_count_ / 8), 64));
  // Past a bitmap level only as far as asked.
  const std::uint64_t level = detail::level_capacity_below(capacity);
  if (level > block_count_ && level >= blocks) capacity = level;
  if (!commit_metadata(capacity)) {
    capacity = std::min(max_blocks_, detail::round_up(blocks, 64));
    if (!commit_metadata(capacity)) return;  // no memory even for headers: kernels will report it
  }
  const std::uint64_t before = block_count_;
  executor_.run(capacity - before, detail::InitializeHeadersKernel<Internals>{make_internals(), before});
  const int levels_before = shape_.covering(before).level_count;
  if (shape_.covering(capacity).level_count > levels_before) {
    Internals grown = make_internals();
    grown.block_count = capacity;
    grown.bitmap_shape = shape_.covering(capacity);
    executor_.run(Internals::kBitmapCount, detail::RebuildUpperLevelsKernel<Internals>{grown, levels_before - 1});
  }
  block_count_ = capacity;
  growth_limit_ = capacity;
  runtime_.copy_from_host(offsetof(detail::HeapRuntimeState, block_limit), &capacity, sizeof(capacity));
  for (ListBuffer& buffer : block_lists_)  // made for fewer blocks: made again on next use
    if (buffer.blocks < capacity) buffer = ListBuffer{};
}

template <class... Classes>
std::uint64_t Heap<Classes...>::headroom_capacity(std::uint64_t mapped) const {
  const std::uint64_t wanted = detail::round_up(options_.growth_headroom * mapped, 64);
  // Up to a quarter of the headroom gives way to a bitmap level fewer: every search and every word
  // that empties pays each level (traffic, 145,000 blocks mapped: three levels instead of four).
  const std::uint64_t level = detail::level_capacity_below(wanted);
  return std::min(max_blocks_, level * 4 >= wanted * 3 ? level : wanted);
}

template <class... Classes>
void Heap<Classes...>::keep_growth_headroom() {
  const std::uint64_t wanted = headroom_capacity(mapped_blocks_.load());
  if (wanted > block_count_ && block_count_ < max_blocks_) extend_capacity(wanted);
  publish_grown_blocks();
}

template <class... Classes>
detail::HeapGrower::Result Heap<Classes...>::map_blocks(std::uint64_t target) {
  const std::uint64_t mapped = mapped_blocks_.load();
  if (target <= mapped) return {mapped, detail::GrowthRefusal::none};
  const std::uint64_t limit = growth_limit_.load();
  const detail::GrowthRefusal at_limit = limit >= max_blocks_ ? detail::GrowthRefusal::max_bytes : detail::GrowthRefusal::capacity;
  if (mapped >= limit) return {mapped, at_limit};
  // A step of a sixteenth of the heap at least: few enough growths that kernels rarely wait
  // (generation grows from 64 MiB to 500 MiB in ~34), and at the heap's peak at most 1/16 of its
  // data memory unused (an eighth put generation's peak at 1.20 times its allocated blocks).
  const std::uint64_t step = std::max<std::uint64_t>(64, detail::round_up(mapped / 16, 64));
  std::uint64_t goal = std::min(limit, detail::round_up(std::max(target, mapped + step), 64));
  if (!data_.ensure(goal * Layout::kDataBytes)) {
    goal = std::min(limit, detail::round_up(target, 64));
    if (!data_.ensure(goal * Layout::kDataBytes)) return {mapped, detail::GrowthRefusal::device_memory};
  }
  mapped_blocks_ = goal;  // free bits: set on the device by whoever takes the answer (heap_growth.cuh)
  return {goal, goal >= target ? detail::GrowthRefusal::none : at_limit};
}

template <class... Classes>
void Heap<Classes...>::write_free_words(std::uint64_t blocks) {
  const BitmapView free_bits = make_internals().free_blocks();
  const std::uint64_t end = (blocks + 63) / 64;
  const auto value = [&](std::uint64_t word) {
    return blocks >= word * 64 + 64 ? ~std::uint64_t{0} : detail::low_bits(static_cast<int>(blocks - word * 64));
  };
  if (options_.backend == Backend::host) {
    for (std::uint64_t w = 0; w < end; ++w) detail::atomic_store(free_bits.level0_word(w), value(w));
    return;
  }
#if SOAHEAP_HAS_CUDA
  // Nothing runs yet: one plain strided copy.
  constexpr std::size_t kPitch = Internals::kBitmapCount * sizeof(std::uint64_t);
  std::vector<std::uint64_t> words(end);
  for (std::uint64_t w = 0; w < end; ++w) words[w] = value(w);
  SOAHEAP_CUDA_CHECK(cudaMemcpy2D(free_bits.level0_word(0), kPitch, words.data(), sizeof(std::uint64_t),
                                  sizeof(std::uint64_t), words.size(), cudaMemcpyHostToDevice));
#endif
}

template <class... Classes>
void Heap<Classes...>::publish_grown_blocks() const {
  if (grower_ == nullptr || mapped_blocks_.load() <= published_host_) return;
  std::uint64_t mapped = 0;
  {
    std::lock_guard<std::mutex> lock(grower_->mutex());  // the answer is written once this is free
    mapped = mapped_blocks_.load();
  }
  // In stream order: takes the answer unless a waiting kernel took it.
  executor_.launch(1, detail::TakeGrowthAnswerKernel<Internals>{make_internals()});
  published_host_ = mapped;
}

template <class... Classes>
bool Heap<Classes...>::reserve_blocks(std::uint64_t blocks) {
  if (blocks <= mapped_block_count()) return true;
  if (!growable()) return false;
  extend_capacity(blocks);
  const detail::HeapGrower::Result result = grower_->grow_now(blocks);
  publish_grown_blocks();
  return result.blocks >= blocks;
}

template <class... Classes>
std::uint64_t Heap<Classes...>::release_free_memory() {
  synchronize();
  // Blocks whose chunks were all freed but that a current region still holds retire here.
  detail::give_back_untyped_regions(executor_, make_internals());
  if (!growable()) return 0;
  std::lock_guard<std::mutex> lock(grower_->mutex());
  const std::uint64_t mapped = mapped_blocks_.load();
  // The highest block in use (not free): everything above it may go.
  const std::uint64_t words = (mapped + 63) / 64;
  std::vector<std::uint64_t> free_words(words);
  const std::uint64_t* level0 = make_internals().free_blocks().level0_word(0);
  constexpr std::uint64_t kStride = Internals::kBitmapCount;
  if (options_.backend == Backend::host) {
    for (std::uint64_t w = 0; w < words; ++w) free_words[w] = level0[w * kStride];
  } else {
#if SOAHEAP_HAS_CUDA
    SOAHEAP_CUDA_CHECK(cudaMemcpy2D(free_words.data(), sizeof(std::uint64_t), level0, kStride * sizeof(std::uint64_t),
                                    sizeof(std::uint64_t), words, cudaMemcpyDeviceToHost));
#endif
  }
  std::uint64_t in_use_end = 0;  // one past the highest block in use
  for (std::uint64_t w = words; w-- > 0;) {
    const std::uint64_t valid = mapped >= w * 64 + 64 ? ~std::uint64_t{0} : detail::low_bits(static_cast<int>(mapped - w * 64));
    const std::uint64_t used = ~free_words[w] & valid;
    if (used != 0) {
      in_use_end = w * 64 + static_cast<std::uint64_t>(detail::highest_set_bit(used)) + 1;
      break;
    }
  }
  // Keep the whole pieces up to the one holding the last block in use, and every block inside them.
  const std::uint64_t kept_bytes = data_.release_boundary(std::max<std::uint64_t>(in_use_end, 1) * Layout::kDataBytes);
  // Never below the size the heap was created with: a program that asked for it will use it again.
  const std::uint64_t keep = std::min(mapped, std::max(kept_bytes / Layout::kDataBytes / 64 * 64, initial_mapped_blocks_));
  if (keep >= mapped || keep < in_use_end) return 0;
  executor_.run((mapped + 63) / 64 - keep / 64, detail::UnmapFreeWordsKernel<Internals>{make_internals(), keep / 64, mapped});
  executor_.synchronize();
  const std::uint64_t before = resident_bytes_locked();
  data_.release_above(keep * Layout::kDataBytes);
  // Headers and bitmap words only for what a kernel may grow to from here (growth_headroom times
  // what stays mapped): a trimmed heap keeping those of its peak's headroom held a header and a
  // byte or more of bitmaps per block of it (generation's 512-byte blocks with 24-byte headers: a
  // fifth more than its live data). Enumeration lists made for more blocks go too (made again on
  // next use).
  const std::uint64_t capacity = headroom_capacity(keep);
  if (capacity < block_count_) {
    release_metadata_above(capacity);
    for (ListBuffer& buffer : block_lists_)
      if (buffer.blocks > capacity) buffer = ListBuffer{};
    block_count_ = capacity;
    growth_limit_ = capacity;
    runtime_.copy_from_host(offsetof(detail::HeapRuntimeState, block_limit), &capacity, sizeof(capacity));
  }
  mapped_blocks_ = keep;
  published_host_ = keep;
  runtime_.copy_from_host(offsetof(detail::HeapRuntimeState, published_blocks), &keep, sizeof(keep));
  grower_->reset(keep);
  return before - resident_bytes_locked();
}

}  // namespace soaheap
