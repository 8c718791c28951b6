#pragma once
/// @file detail/ordered_run.cuh
/// @brief Ordered compaction (`soaheap::defragment<T>(heap, options, order)`): the objects of a
///        concrete class end in ceil(live/N) blocks, in ascending key order (stable: equal keys keep
///        their address order), each object moved once, pointers rewritten in one scan.
///
/// Putting L objects into key order inside the blocks they already occupy would be a permutation
/// in place, which moves objects along cycles or twice. Instead the run takes D = ceil(L/N) free
/// blocks (the lowest-addressed ones) and gathers the objects into them in key order; the old
/// blocks keep their bitmaps (and each old slot its object's new address) until the rewrite has
/// read them, then they are all freed. The heap needs
/// D free blocks for that; without them the run changes nothing and throws out_of_memory.
///
/// Steps, all on the heap's stream, with two host reads (the survey's counts, to size the sort, and
/// the final counts):
///  1. survey, one thread per heap block: per block the class's live objects and whether it is
///     free (an OrderFlow word, scanned: item offsets in address order, ranks of free blocks); the
///     class's blocks are listed and marked "old" in a bit array.
///  2. keys, one thread per slot of the listed blocks: item i (the i-th object in address order)
///     gets its key and its source position block·64 + slot.
///  3. sort: CUB's radix sort of (key, source) pairs over the key's significant bits (stable), in
///     32-bit words when keys and source positions fit in them (half the sort's memory traffic).
///  4. claim, one thread per heap block: the free blocks of rank < D become the class's new blocks,
///     full except the last.
///  5. copy, one thread per object rank r: the r-th object in key order goes to slot r % N of new
///     block r / N (writes coalesced, reads gathered). Its new pointer is left in its old slot's
///     first 8-byte field (only this thread reads that object: compaction_plan.cuh does the same);
///     a class without such a field gets the record rank_of[item] = r instead.
///  6. rewrite: every pointer field that can point to the class, in every class, is redirected when
///     it points into an old block: to the forwarding pointer in its old slot, or through rank_of
///     (item from the old block's untouched bitmap).
///  7. state: old blocks become free, new ones get active/defrag from their fill.

#include <soaheap/core/detail/operation_timer.cuh>
#include <soaheap/core/heap.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/defrag/defrag_options.hpp>
#include <soaheap/defrag/detail/compaction_plan.cuh>
#include <soaheap/defrag/detail/copy_objects.cuh>
#include <soaheap/defrag/detail/ordered_kernels.cuh>
#include <soaheap/defrag/detail/plan_run.cuh>
#include <soaheap/defrag/detail/rewrite_pointers.cuh>
#include <soaheap/defrag/detail/state_update.cuh>
#include <soaheap/base/log.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#if SOAHEAP_HAS_CUDA
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#endif

namespace soaheap::detail {

/// Persistent per-heap scratch of ordered compaction (a Heap attachment) beyond what it shares with
/// the plan (PlanScratch: flows, offsets, block lists, the old-block bits, phase timers): per object
/// two key and two source words (the sort's double buffers) and the forwarding record (used by
/// classes without an in-place forwarding field). Grown when a
/// class has more objects than any ordered before; steady state allocates nothing.
struct OrderScratch {
  Memory keys[2];      ///< u64[capacity], or u32 in the first half (OrderPlan::narrow)
  Memory sources[2];   ///< u64[capacity], or u32 likewise: block * 64 + slot
  Memory rank_of;      ///< u32[capacity]: item (address order) -> rank (key order)
  Memory new_blocks;   ///< u32[M]
  Memory kept_blocks;  ///< u32[M]: the class's blocks a run from a first block leaves (made on first such run)
  Memory counts;       ///< OrderCounts
  Memory sort_temp;    ///< CUB temporary storage of the sort
  Memory scan_temp;    ///< CUB temporary storage of the flows' scan
  OperationTimer order_timer;  ///< keys and sort
  std::uint64_t capacity = 0;
  std::uint64_t scanned_blocks = 0;  ///< blocks scan_temp is sized for

  OrderScratch() { order_timer.enabled = true; }

  void ensure(Backend backend, std::uint64_t blocks, std::uint64_t objects) {
    if (new_blocks.bytes() < blocks * sizeof(std::uint32_t)) {
      new_blocks = Memory(backend, blocks * sizeof(std::uint32_t));
      counts = Memory(backend, sizeof(OrderCounts));
    }
    if (scanned_blocks != blocks) {
#if SOAHEAP_HAS_CUDA
      if (backend == Backend::cuda) scan_temp = Memory(Backend::cuda, scan_temp_bytes(blocks, nullptr));
#endif
      scanned_blocks = blocks;
    }
    if (objects <= capacity) return;
    for (Memory& buffer : keys) buffer = Memory(backend, objects * sizeof(std::uint64_t));
    for (Memory& buffer : sources) buffer = Memory(backend, objects * sizeof(std::uint64_t));
    rank_of = Memory(backend, objects * sizeof(std::uint32_t));
    capacity = objects;
  }

  /// offsets = exclusive prefix sums of the OrderFlow words @p flows of @p blocks blocks
  /// (stream-ordered on cuda).
  void scan_flows(const Executor& executor, const std::uint64_t* flows, std::uint64_t* offsets, std::uint64_t blocks) {
    if (executor.backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      std::size_t bytes = scan_temp_bytes(blocks, executor.stream);
      if (scan_temp.bytes() < bytes) scan_temp = Memory(Backend::cuda, bytes);  // sized in ensure(); a guard
      SOAHEAP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scan_temp.get(), bytes, flows, offsets,
                                                       static_cast<std::int64_t>(blocks), executor.stream));
#endif
      return;
    }
    std::uint64_t sum = 0;
    for (std::uint64_t block = 0; block < blocks; ++block) {
      offsets[block] = sum;
      sum += flows[block];
    }
  }

#if SOAHEAP_HAS_CUDA
 private:
  static std::size_t scan_temp_bytes(std::uint64_t blocks, cudaStream_t stream) {
    std::size_t bytes = 0;
    SOAHEAP_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, bytes, static_cast<const std::uint64_t*>(nullptr),
                                                     static_cast<std::uint64_t*>(nullptr),
                                                     static_cast<std::int64_t>(blocks), stream));
    return bytes;
  }
#endif
};

/// Bytes of CUB temporary storage that sorting @p count pairs of Word by @p key_bits bits needs.
template <class Word>
std::size_t sort_temp_bytes(OrderScratch& scratch, const Executor& executor, std::uint64_t count, int key_bits) {
  std::size_t bytes = 0;
#if SOAHEAP_HAS_CUDA
  cub::DoubleBuffer<Word> keys(scratch.keys[0].as<Word>(), scratch.keys[1].as<Word>());
  cub::DoubleBuffer<Word> sources(scratch.sources[0].as<Word>(), scratch.sources[1].as<Word>());
  SOAHEAP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, sources, static_cast<std::int64_t>(count), 0,
                                                     key_bits, executor.stream));
#else
  (void)scratch;
  (void)executor;
  (void)count;
  (void)key_bits;
#endif
  return bytes;
}

/// Grows the sort's temporary storage to what @p count pairs need, in either word width.
inline void reserve_sort_temp(OrderScratch& scratch, const Executor& executor, std::uint64_t count) {
  if (executor.backend != Backend::cuda) return;
  const std::size_t bytes = std::max(sort_temp_bytes<std::uint32_t>(scratch, executor, count, 32),
                                     sort_temp_bytes<std::uint64_t>(scratch, executor, count, 64));
  if (scratch.sort_temp.bytes() < bytes) scratch.sort_temp = Memory(Backend::cuda, bytes);
}

/// Sorts @p count (key, source) pairs of Word by the low @p key_bits bits of the keys, stably; the
/// sorted sources end in the returned buffer (one of scratch.sources).
template <class Word>
const Word* sort_words(OrderScratch& scratch, const Executor& executor, std::uint64_t count, int key_bits) {
  Word* keys_in = scratch.keys[0].as<Word>();
  Word* sources_in = scratch.sources[0].as<Word>();
  if (executor.backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
    cub::DoubleBuffer<Word> keys(keys_in, scratch.keys[1].as<Word>());
    cub::DoubleBuffer<Word> sources(sources_in, scratch.sources[1].as<Word>());
    const auto items = static_cast<std::int64_t>(count);
    std::size_t bytes = sort_temp_bytes<Word>(scratch, executor, count, key_bits);
    if (scratch.sort_temp.bytes() < bytes) scratch.sort_temp = Memory(Backend::cuda, bytes);  // reserved above; never in practice
    SOAHEAP_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.sort_temp.get(), bytes, keys, sources, items, 0, key_bits,
                                                       executor.stream));
    return sources.Current();
#endif
  }
  // Host backend: a stable sort of the item indices, then the sources in that order.
  const std::uint64_t mask = key_bits >= 64 ? ~std::uint64_t{0} : low_bits(key_bits);
  std::vector<std::uint64_t> order(count);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint64_t a, std::uint64_t b) { return (keys_in[a] & mask) < (keys_in[b] & mask); });
  Word* sorted = scratch.sources[1].as<Word>();
  for (std::uint64_t rank = 0; rank < count; ++rank) sorted[rank] = sources_in[order[rank]];
  return sorted;
}

/// Ordered compaction of concrete class C (the caller holds the heap's operation guard), of its
/// objects in blocks at or above @p first_block. Adds to @p result and to @p unused_before /
/// @p unused_after, the class's free slots in blocks' worth (of the blocks it moves from).
/// @throw out_of_memory when the heap has fewer free blocks than the class needs and cannot grow
/// by them (nothing changed)
template <class C, class Order, class... Classes>
void compact_class_in_order(Heap<Classes...>& heap, const Order& order, bool map_fresh_blocks, std::uint64_t first_block,
                            DefragResult& result, double& unused_before, double& unused_after) {
  using HeapType = Heap<Classes...>;
  using View = ::soaheap::detail::internals_t<HeapType>;
  constexpr int kClass = HeapType::template class_id<C>;
  constexpr int kCapacity = HeapType::template capacity<C>;
  constexpr int kField = in_place_forwarding_field_v<View, C>;
  const Executor& executor = heap.executor();
  const std::uint64_t blocks = heap.block_count();
  PlanScratch& shared = detail::InternalsAccess::attachment<PlanScratch>(heap);
  shared.ensure(heap.backend(), blocks, HeapType::kClassCount);
  OrderScratch& scratch = detail::InternalsAccess::attachment<OrderScratch>(heap);
  scratch.ensure(heap.backend(), blocks, 0);
  double before[kPlanPhaseCount];
  read_phase_totals(shared, executor, before);
  const double order_before_s = scratch.order_timer.seconds(executor);

  OrderPlan<View> plan;
  plan.view = ::soaheap::detail::internals(heap);
  plan.counts = scratch.counts.template as<OrderCounts>();
  plan.flows = shared.flows.template as<std::uint64_t>();  // room for PlanFlow[M]: u64[M] fits
  plan.offsets = shared.offsets.template as<std::uint64_t>();
  plan.old_blocks = shared.class_list(kClass);
  plan.old_bits = shared.donor_bits.template as<std::uint64_t>();
  plan.new_blocks = scratch.new_blocks.template as<std::uint32_t>();
  plan.class_index = kClass;
  plan.capacity = kCapacity;
  plan.first_block = first_block;

  scratch.order_timer.start(executor);
  executor.launch(sizeof(OrderCounts) / sizeof(std::uint64_t), ZeroWordsKernel{reinterpret_cast<std::uint64_t*>(plan.counts)});
  executor.launch(PlanScratch::donor_words(blocks), ZeroWordsKernel{plan.old_bits});
  executor.launch(blocks, OrderSurveyKernel<View>{plan});
  scratch.scan_flows(executor, plan.flows, plan.offsets, blocks);
  OrderCounts counts{};
  scratch.counts.copy_to_host(&counts, 0, sizeof(counts));  // waits: the sort needs the object count on the host
  const std::uint64_t capacity = static_cast<std::uint64_t>(kCapacity);
  plan.live = counts.live;
  plan.new_block_count = (counts.live + capacity - 1) / capacity;

  if (counts.live <= std::uint64_t{0xffffffffu} && counts.free_blocks < plan.new_block_count) {
    scratch.order_timer.stop(executor);
    // A growable heap maps the fresh blocks the run gathers into, then surveys again: the
    // heap's block count, and with it this run's view and scratch, may have changed.
    if (map_fresh_blocks && heap.reserve_blocks(heap.mapped_block_count() + (plan.new_block_count - counts.free_blocks)))
      return compact_class_in_order<C>(heap, order, false, first_block, result, unused_before, unused_after);
    throw out_of_memory("soaheap: ordered compaction of " + std::string(C::kName) + " needs " +
                        std::to_string(plan.new_block_count) + " free blocks for its " + std::to_string(counts.live) +
                        " objects (it gathers them into fresh blocks), but the heap has " +
                        std::to_string(counts.free_blocks) + " free of " + std::to_string(blocks) +
                        "; nothing was changed (a heap with more blocks, or compaction without an order, works)");
  }
  result.blocks_before += counts.listed;
  result.live_objects += counts.live;
  result.minimum_blocks += plan.new_block_count;
  result.candidates_before += counts.candidates_before;
  const auto unused_blocks = [&](std::uint64_t block_count) {
    return static_cast<double>(block_count * capacity - counts.live) / static_cast<double>(capacity);
  };
  unused_before += unused_blocks(counts.listed);
  if (counts.live == 0 || counts.live > std::uint64_t{0xffffffffu}) {
    scratch.order_timer.stop(executor);
    if (counts.live != 0)
      throw invalid_argument("soaheap: ordered compaction of " + std::string(C::kName) + ": " +
                             std::to_string(counts.live) + " objects are more than the 2^32 one run can order");
    result.blocks_after += counts.listed;
    result.candidates_after += counts.candidates_before;
    unused_after += unused_blocks(counts.listed);
    return;
  }
  // Scratch grows only when a class has more objects than any ordered before: not a cost of the
  // run (the GPU would idle in the timed window while the host allocates).
  scratch.order_timer.stop(executor);
  scratch.ensure(heap.backend(), blocks, counts.live);
  if (first_block != 0 && scratch.kept_blocks.bytes() < blocks * sizeof(std::uint32_t))
    scratch.kept_blocks = Memory(heap.backend(), blocks * sizeof(std::uint32_t));
  reserve_sort_temp(scratch, executor, counts.live);
  scratch.order_timer.start(executor);
  plan.keys = scratch.keys[0].get();
  plan.sources = scratch.sources[0].get();
  plan.rank_of = scratch.rank_of.template as<std::uint32_t>();
  const int key_bits = std::clamp(order.key_bits(plan.view), 1, 64);
  plan.narrow = sort_words_fit(key_bits, blocks);
  executor.launch(counts.listed * capacity, OrderKeysKernel<View, C, Order>{plan, order});
  plan.sorted_sources = plan.narrow ? static_cast<const void*>(sort_words<std::uint32_t>(scratch, executor, counts.live, key_bits))
                                    : static_cast<const void*>(sort_words<std::uint64_t>(scratch, executor, counts.live, key_bits));
  scratch.order_timer.stop(executor);

  shared.timers[kPlanPhaseCopy].start(executor);
  executor.launch(blocks, OrderClaimKernel<View>{plan});
  executor.launch(counts.live, OrderCopyKernel<View, C, kField>{plan});
  shared.timers[kPlanPhaseCopy].stop(executor);

  // One scan of the fields that can point to a C, in every class that has them; C's own objects
  // are scanned in their new blocks.
  shared.timers[kPlanPhaseRewrite].start(executor);
  std::uint64_t* device_listed = &plan.counts->listed;  // non-zero: ListClassBlocksKernel lists
  auto rewrite_holder = [&](auto holder_tag) {
    using U = tag_type_t<decltype(holder_tag)>;
    if constexpr (!U::kAbstract && can_hold_pointer_to_v<U, C>) {
      using Kernel = RewritePointersKernel<View, U, C, OrderRelocation<View, C, kField>>;
      constexpr int kHolder = HeapType::template class_id<U>;
      if constexpr (kHolder == kClass) {
        if (first_block == 0) {
          executor.launch(Kernel::thread_count(plan.new_block_count), Kernel{plan.view, plan.new_blocks, {plan}});
        } else {  // the objects below first_block stayed and may point to moved ones: every block not old
          std::uint32_t* kept = scratch.kept_blocks.template as<std::uint32_t>();
          executor.launch(1, ZeroWordsKernel{shared.holder_count(kHolder)});
          executor.launch(blocks, ListClassBlocksKernel<View>{plan.view, kHolder, kept, shared.holder_count(kHolder),
                                                              device_listed, plan.old_bits});
          executor.launch_counted(shared.holder_count(kHolder), Kernel::thread_count(1), Kernel::thread_count(blocks),
                                  LaunchHint{}, Kernel{plan.view, kept, {plan}});
        }
      } else {
        executor.launch(1, ZeroWordsKernel{shared.holder_count(kHolder)});
        executor.launch(blocks, ListClassBlocksKernel<View>{plan.view, kHolder, shared.class_list(kHolder),
                                                            shared.holder_count(kHolder), device_listed});
        executor.launch_counted(shared.holder_count(kHolder), Kernel::thread_count(1), Kernel::thread_count(blocks),
                                LaunchHint{}, Kernel{plan.view, shared.class_list(kHolder), {plan}});
      }
    }
  };
  (rewrite_holder(typename View::template type_tag<Classes>{}), ...);
  shared.timers[kPlanPhaseRewrite].stop(executor);

  shared.timers[kPlanPhaseState].start(executor);
  executor.launch(counts.listed, OrderReleaseKernel<View>{plan});
  executor.launch(plan.new_block_count, OrderRefreshKernel<View>{plan});
  shared.timers[kPlanPhaseState].stop(executor);
  scratch.counts.copy_to_host(&counts, 0, sizeof(counts));
  heap.throw_recorded_error();

  double after[kPlanPhaseCount];
  read_phase_totals(shared, executor, after);
  result.times.order_ms += (scratch.order_timer.seconds(executor) - order_before_s) * 1e3;
  result.times.copy_ms += after[kPlanPhaseCopy] - before[kPlanPhaseCopy];
  result.times.rewrite_ms += after[kPlanPhaseRewrite] - before[kPlanPhaseRewrite];
  result.times.state_ms += after[kPlanPhaseState] - before[kPlanPhaseState];
  ++result.passes;
  result.blocks_freed += counts.listed - plan.new_block_count;  // net: D fresh blocks replace the old ones
  result.objects_moved += counts.live;
  result.bytes_moved += counts.live * object_size_v<C>;
  result.blocks_after += plan.new_block_count;
  unused_after += unused_blocks(plan.new_block_count);
  result.candidates_after += counts.candidates_after;
  log::debug("defrag ", C::kName, " ordered: ", counts.live, " objects, ", counts.listed, " -> ", plan.new_block_count,
             " blocks, key bits ", key_bits, plan.narrow ? " (32-bit sort words)" : " (64-bit sort words)");
}

}  // namespace soaheap::detail
