#pragma once
/// @file detail/kernels.cuh
/// @brief Kernel bodies of the heap's bulk operations, written once for both backends. Each is a
///        functor called with a logical thread index by detail::Executor.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/detail/block_counting.cuh>
#include <soaheap/core/detail/heap_growth.cuh>
#include <soaheap/core/detail/warp_aggregation.cuh>
#include <soaheap/core/heap_view.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Bit @p bit of the word at @p word, read through the read-only cache: for bitmaps nothing writes
/// while the kernel runs (the atomic loads the allocator needs bypass L1).
SOAHEAP_HD inline bool read_only_bit_of_word(const std::uint64_t* word, std::uint64_t bit) {
#if SOAHEAP_DEVICE_CODE
  const std::uint64_t bits = __ldg(reinterpret_cast<const unsigned long long*>(word));
#else
  const std::uint64_t bits = *word;
#endif
  return ((bits >> bit) & 1u) != 0;
}
/// Bit @p position of @p bitmap's level 0.
SOAHEAP_HD inline bool read_only_bit(const BitmapView& bitmap, std::uint64_t position) {
  return read_only_bit_of_word(bitmap.level0_word(position / 64), position % 64);
}
/// Bit @p position of a plain bit array (a plan's own donor bits).
SOAHEAP_HD inline bool read_only_bit(const std::uint64_t* words, std::uint64_t position) {
  return read_only_bit_of_word(words + position / 64, position % 64);
}

/// Gives @p block the header of a block that was never used: allocation bitmap invalidated, no class.
template <class View>
SOAHEAP_HD void reset_header(const View& view, std::uint64_t block) {
  view.headers[block].allocation = kInvalidatedBitmap;
  view.headers[block].run = 0;
  view.headers[block].class_id = kNoClass;
}

/// Marks every block free (allocation bitmap invalidated, no class).
template <class View>
struct InitializeHeadersKernel {
  View view;
  std::uint64_t first = 0;  ///< the first block to initialize (a growing heap's new ones)
  SOAHEAP_HD void operator()(std::uint64_t index) const { reset_header(view, first + index); }
};

/// Derives a growable heap's bitmap levels from @p from_level up again when its blocks came to need
/// more levels (BitmapShape::covering): the levels above the old top were not kept, and their words
/// may still say what they said before a release. Every level up to @p from_level is exact, and
/// blocks beyond the old count have no bit set. One thread per bitmap; a few words per level.
template <class View>
struct RebuildUpperLevelsKernel {
  View view;       ///< with the new block count and levels
  int from_level;  ///< the old top level (exact)
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const BitmapView bitmap = view.bitmap(static_cast<int>(index));
    std::uint64_t words = view.block_words();  // of the level below the one written
    for (int level = 0; level + 1 < bitmap.level_count(); ++level) {
      const std::uint64_t parents = (words + 63) / 64;
      if (level >= from_level) {
        for (std::uint64_t parent = 0; parent < parents; ++parent) {
          std::uint64_t bits = 0;
          for (std::uint64_t child = parent * 64; child < words && child < parent * 64 + 64; ++child)
            if (atomic_load(&bitmap.word(level, child)) != 0) bits |= std::uint64_t{1} << (child % 64);
          atomic_store(&bitmap.word(level + 1, parent), bits);
        }
      }
      words = parents;
    }
  }
};

/// A fixed heap's creation: sets the levels above the free bits written by copy, one thread per
/// level-0 word, and publishes its @p blocks blocks.
template <class View>
struct PublishFreeBlocksKernel {
  View view;
  std::uint64_t blocks;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    view.free_blocks().refresh_parents(index);
    if (index == 0) atomic_max(&view.state->published_blocks, blocks);
  }
};

/// A growable heap between kernels: takes the grower's answer unless a waiting kernel took it
/// (heap_growth.cuh), after the reader's token, which a kernel on another stream may hold. One thread.
template <class View>
struct TakeGrowthAnswerKernel {
  View view;
  SOAHEAP_HD void operator()(std::uint64_t) const { take_growth_answer_waiting(view); }
};

/// Takes blocks [64·first_word, @p end) out of the free bitmap (trim: their memory goes back) and
/// resets their headers. A free block's header may still name the class it last held (a block
/// emptied by moving its objects out keeps its allocation word), and out of the free bitmap it
/// looks in use to scans of the headers: heap.stats() counted such blocks' slots as live objects
/// after a trim (an H200, blocks between the heap's mapped end and the end of its headers).
template <class View>
struct UnmapFreeWordsKernel {
  View view;
  std::uint64_t first_word;
  std::uint64_t end;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint64_t word = first_word + index;
    const std::uint64_t bits = end >= word * 64 + 64 ? ~std::uint64_t{0} : low_bits(static_cast<int>(end - word * 64));
    view.free_blocks().clear_in_word(word, bits);
    for (int bit = 0; bit < 64; ++bit)
      if (((bits >> bit) & 1u) != 0) reset_header(view, word * 64 + static_cast<std::uint64_t>(bit));
  }
};

/// A minimal argument pack usable in device code (std::tuple is host-only).
template <class... Ts>
struct ArgumentPack;
template <>
struct ArgumentPack<> {
  template <class F>
  SOAHEAP_HD void apply(F&& f) const {
    f();
  }
};
template <class Head, class... Tail>
struct ArgumentPack<Head, Tail...> {
  Head head;
  ArgumentPack<Tail...> tail;
  template <class F>
  SOAHEAP_HD void apply(F&& f) const {
    tail.apply([&](const auto&... rest) { f(head, rest...); });
  }
};
template <class... Ts>
ArgumentPack<Ts...> make_argument_pack(const Ts&... values);
template <>
inline ArgumentPack<> make_argument_pack() {
  return {};
}
template <class Head, class... Tail>
ArgumentPack<Head, Tail...> make_argument_pack(const Head& head, const Tail&... tail) {
  return {head, make_argument_pack(tail...)};
}

/// One class whose allocated blocks an EnumerateKernel lists.
struct EnumerationTarget {
  int class_index;
  std::uint64_t full_mask;      ///< all slots of a block of the class
  std::uint32_t* ids;           ///< receives the block ids (ascending within a warp's 128 blocks)
  std::uint64_t* snapshots;     ///< receives each listed block's iteration snapshot (snapshots[i] for ids[i])
  std::uint64_t* count;         ///< receives their number; zero before the kernel
  std::uint64_t* next_count;    ///< the list's other counter, zeroed here for its next use
};

/// Which interval of an EnumerationClock one enumeration launch widens (HeapOptions::time_enumeration
/// on cuda); without a clock it times nothing. The stamps replace two CUDA events per parallel_do:
/// recording them cost a waited operation 5.4 µs (parallel_do_bench small_class_waited_timed on
/// an H100; docs/dynasoar-migration.md, "What differs"), a lane's two atomics per warp cost nothing measurable.
struct EnumerationStamp {
  EnumerationClock* clock = nullptr;
  int slot = 0;

  /// Called by every thread of the launch before its work: thread 0 folds the other interval (the
  /// previous enumeration launch has finished: launches of one stream run in order), the first
  /// lane of each warp moves this launch's start earlier.
  SOAHEAP_HD void begin(std::uint64_t index) const {
#if SOAHEAP_DEVICE_CODE
    if (clock == nullptr) return;
    const unsigned lanes = __activemask();
    if (index == 0) {
      const int other = 1 - slot;
      clock->nanoseconds += clock->interval(other);
      clock->inverted_start[other] = 0;
      clock->end[other] = 0;
    }
    if ((index & 31u) == 0) atomic_max(&clock->inverted_start[slot], ~global_nanoseconds());
    __syncwarp(lanes);  // the work after it checks that its warp runs converged
#else
    (void)index;
#endif
  }
  /// Called by every thread after its work: the first lane of each warp moves the end later.
  SOAHEAP_HD void end(std::uint64_t index) const {
#if SOAHEAP_DEVICE_CODE
    if (clock == nullptr) return;
    const unsigned lanes = __activemask();
    if ((index & 31u) == 0) atomic_max(&clock->end[slot], global_nanoseconds());
    __syncwarp(lanes);
#else
    (void)index;
#endif
  }
};

/// Writes entry @p position of @p target's list: block id and iteration snapshot side by side.
SOAHEAP_HD inline void list_block(const EnumerationTarget& target, std::uint64_t position, std::uint64_t block,
                                  std::uint64_t allocation) {
  target.ids[position] = static_cast<std::uint32_t>(block);
  target.snapshots[position] = allocation & target.full_mask;
}

/// parallel_do, step 1, for @p kTargets classes in one kernel: one warp per 128 blocks of the heap
/// and class, each lane looking at 4 of them (32 apart, so that a warp's header loads are
/// consecutive). A lane reads the class's allocated and active bitmap words of its blocks, the warp
/// reserves list entries for all its listed blocks with one atomic (a quarter of the atomics one
/// block per thread needs: they all go to one counter), and each listed block's id and iteration
/// snapshot (the objects that exist now; objects created during the operation are not visited) are
/// written next to each other in the list, in block order within the warp. The method kernel then
/// finds block and snapshot with two independent loads from the list instead of a chain of list →
/// header loads.
///
/// Only blocks with free slots have their header read: at a kernel boundary a block of the class
/// that is not active is full (the invariant `active ⇔ fill < capacity` that heap.validate()
/// checks), so its snapshot is every slot. Reading every header of the heap cost the bandwidth of
/// a header per block for every class of every parallel_do, also for blocks of other classes and
/// free ones: a parallel_do over an empty class cost as much as one over a full heap, and a
/// program of many short parallel_dos over a large heap paid it on every one (DynaSOAr's
/// structure through the shim on an H100: enumeration 10.4 → 8.6 s of 60 → 57 s; see
/// docs/decisions/012-snapshot-in-the-list-and-rows.md). Nothing allocates during the enumeration, so plain loads are enough; it
/// needs no temporary memory and no result on the host.
template <class View, int kTargets>
struct EnumerateKernel {
  static constexpr int kBlocksPerLane = kEnumerationBlocksPerLane;  // detail/tuning.cuh
  static constexpr std::uint64_t kBlocksPerWarp = 32 * kBlocksPerLane;
  /// Threads per target for a heap of @p blocks blocks (whole warps).
  SOAHEAP_HD static std::uint64_t threads_for(std::uint64_t blocks) {
    return (blocks + kBlocksPerWarp - 1) / kBlocksPerWarp * 32;
  }

  View view;
  std::uint64_t blocks;  ///< blocks of the heap
  EnumerationTarget targets[kTargets];
  EnumerationStamp stamp;

  SOAHEAP_HD void operator()(std::uint64_t index) const {
    stamp.begin(index);
    list_blocks(index);
    stamp.end(index);
  }

 private:
  SOAHEAP_HD void list_blocks(std::uint64_t index) const {
#if SOAHEAP_DEVICE_CODE
    allow_dependent_launch();  // the method kernel may start launching (it waits for our results)
#endif
    const std::uint64_t per_target = threads_for(blocks);
    int t = 0;
    std::uint64_t local = index;
    while (t + 1 < kTargets && local >= per_target) {  // no 64-bit division for the common one target
      local -= per_target;
      ++t;
    }
    const EnumerationTarget& target = targets[t];
    if (local == 0) *target.next_count = 0;
    const BitmapView allocated = view.allocated_blocks(target.class_index);
    const BitmapView active = view.active_blocks(target.class_index);
    const std::uint64_t first = local / 32 * kBlocksPerWarp + local % 32;
    bool listed[kBlocksPerLane];
    bool with_room[kBlocksPerLane];
SOAHEAP_UNROLL
    for (int k = 0; k < kBlocksPerLane; ++k) {  // all bitmap loads issued before any is used
      const std::uint64_t block = first + 32 * static_cast<std::uint64_t>(k);
      listed[k] = false;
      with_room[k] = false;
      if (block < blocks) {
        listed[k] = ((allocated.word(0, block / 64) >> (block % 64)) & 1u) != 0;
        with_room[k] = ((active.word(0, block / 64) >> (block % 64)) & 1u) != 0;
      }
    }
    std::uint64_t allocation[kBlocksPerLane];
SOAHEAP_UNROLL
    for (int k = 0; k < kBlocksPerLane; ++k) {  // then the headers of partly filled listed blocks only
      allocation[k] = target.full_mask;
      if (listed[k] && with_room[k]) allocation[k] = view.headers[first + 32 * static_cast<std::uint64_t>(k)].allocation;
    }
#if SOAHEAP_DEVICE_CODE
    if (whole_warp_converged()) {  // always, for whole warps of the launch; the fallback is below
      unsigned ballots[kBlocksPerLane];
      std::uint64_t total = 0;
SOAHEAP_UNROLL
      for (int k = 0; k < kBlocksPerLane; ++k) {
        ballots[k] = __ballot_sync(kFullWarp, listed[k]);
        total += static_cast<std::uint64_t>(popcount(ballots[k]));
      }
      std::uint64_t base = 0;
      if (lane_id() == 0 && total != 0) base = atomic_fetch_add(target.count, total);
      base = __shfl_sync(kFullWarp, base, 0);
      const unsigned below = lanes_below();
SOAHEAP_UNROLL
      for (int k = 0; k < kBlocksPerLane; ++k) {
        if (listed[k]) list_block(target, base + static_cast<std::uint64_t>(popcount(ballots[k] & below)),
                                  first + 32 * static_cast<std::uint64_t>(k), allocation[k]);
        base += static_cast<std::uint64_t>(popcount(ballots[k]));
      }
      return;
    }
#endif
SOAHEAP_UNROLL
    for (int k = 0; k < kBlocksPerLane; ++k)
      if (listed[k]) list_block(target, atomic_fetch_add(target.count, 1), first + 32 * static_cast<std::uint64_t>(k), allocation[k]);
  }
};

/// parallel_do, step 1, for one class whose list is expected to be tiny (an empty or nearly empty
/// class; Executor::launch_pair runs it in one grid with the method): thread i reads word i of the
/// class's allocated bitmap one level above the blocks (bit j set: level-0 word 64·i + j lists
/// blocks; at a kernel boundary every level agrees with the one below) and visits only the level-0
/// words below its set bits. An empty class then costs one read per 4,096 blocks of the heap where
/// EnumerateKernel reads two words per 64 blocks and keeps 32 threads busy per 128. On an H100 the
/// dense step made the grid of an empty parallel_do over a 1 M-object heap 5.6 µs of GPU time
/// (an empty kernel: 2.3 µs), so back-to-back empty parallel_dos ran at the GPU's pace rather than
/// the launches'; with this one, over a 16.7 M-object heap, 5.0 → 3.6–4.3 µs per call
/// (docs/decisions/014-tiny-and-short-lists.md).
/// Each listed level-0 word takes its entries with one atomic; a block with free slots has its
/// header read for the snapshot, as in EnumerateKernel.
template <class View>
struct SparseEnumerateKernel {
  View view;
  EnumerationTarget target;
  EnumerationStamp stamp;

  /// Threads for a heap of @p blocks blocks: one per word above level 0, in whole warps.
  SOAHEAP_HD static std::uint64_t threads_for(std::uint64_t blocks) {
    const std::uint64_t summary_words = (blocks + 64 * 64 - 1) / (64 * 64);
    return (summary_words + 31) / 32 * 32;
  }

  SOAHEAP_HD void operator()(std::uint64_t index) const {
    stamp.begin(index);
    list_blocks(index);
    stamp.end(index);
  }

 private:
  SOAHEAP_HD void list_blocks(std::uint64_t index) const {
    if (index == 0) *target.next_count = 0;
    const BitmapView allocated = view.allocated_blocks(target.class_index);
    const BitmapView active = view.active_blocks(target.class_index);
    std::uint64_t summary = 0;  // bit j: level-0 word 64·index + j has set bits
    if (allocated.level_count() == 1) {
      summary = index == 0 ? 1 : 0;  // a heap of at most 64 blocks: one level-0 word
    } else if (index < (allocated.size() + 64 * 64 - 1) / (64 * 64)) {
      summary = allocated.word(1, index);
    }
    while (summary != 0) {
      const std::uint64_t word_index = index * 64 + static_cast<std::uint64_t>(lowest_set_bit(summary));
      summary &= summary - 1;
      std::uint64_t blocks = allocated.word(0, word_index);
      const std::uint64_t with_room = active.word(0, word_index);
      if (blocks == 0) continue;
      std::uint64_t position = atomic_fetch_add(target.count, static_cast<std::uint64_t>(popcount(blocks)));
      while (blocks != 0) {
        const int bit = lowest_set_bit(blocks);
        blocks &= blocks - 1;
        const std::uint64_t block = word_index * 64 + static_cast<std::uint64_t>(bit);
        const std::uint64_t allocation = ((with_room >> bit) & 1u) != 0 ? view.headers[block].allocation : target.full_mask;
        list_block(target, position++, block, allocation);
      }
    }
  }
};

/// The class that declares a member function (`owner` of `void (Base::*)(int)` is Base).
template <class Method>
struct member_function_traits;
template <class Owner, class Result, class... Parameters>
struct member_function_traits<Result (Owner::*)(Parameters...)> {
  using owner = Owner;
};
template <class Owner, class Result, class... Parameters>
struct member_function_traits<Result (Owner::*)(Parameters...) const> {
  using owner = Owner;
};

/// parallel_do, step 2: N_C consecutive items per listed block of class C, item s runs the method on
/// slot s if the block's snapshot holds an object there. prefetch() reads what an item needs from
/// the list (block id and snapshot: independent loads, the list was written by step 1) and run()
/// calls the method, so that a thread that serves several items issues all their list loads
/// before the first method's field loads (see for_each_counted_row_kernel).
///
/// The snapshot is read from the list, not from the block header, so a method's `destroy` of
/// another object of C is not seen by the running parallel_do: as in DynaSOAr, a method may
/// destroy `this` and objects of other classes, never another object of the class it runs over.
template <class View, class T, class C, auto Method, class Arguments>
struct ParallelDoKernel {
  static constexpr int kCapacity = View::Layout::template capacity<C>;
  // C's setting; 0 for classes that declare none (the DynaSOAr shim's classes do not derive from Object).
  static constexpr int kMinBlocksPerMultiprocessor = min_blocks_per_multiprocessor<C>;
  struct Item {
    std::uint64_t snapshot;
    std::uint32_t block;
  };
  View view;
  const std::uint32_t* blocks;
  const std::uint64_t* snapshots;
  Arguments arguments;
  SOAHEAP_HD Item prefetch(std::uint64_t tid) const {
    const std::uint64_t entry = tid / kCapacity;
    return {snapshots[entry], blocks[entry]};
  }
  SOAHEAP_HD void run(std::uint64_t tid, const Item& item) const {
    const int slot = static_cast<int>(tid % kCapacity);
    if (((item.snapshot >> slot) & 1u) == 0) return;
    T* object = internals(view).template make_pointer<C>(item.block, slot);
    arguments.apply([&](const auto&... values) { (object->*Method)(values...); });
  }
  SOAHEAP_HD void operator()(std::uint64_t tid) const { run(tid, prefetch(tid)); }
  /// Asks L2 for the lines that item @p tid's method may read: the value of each field of C in its
  /// slot (one `prefetch.global.L2` per field; nothing waits for them). for_each_pipelined_row_kernel
  /// warms a thread's next object this way while the current one's method runs.
  SOAHEAP_HD void warm(std::uint64_t tid, const Item& item) const {
#if SOAHEAP_DEVICE_CODE
    const int slot = static_cast<int>(tid % kCapacity);
    if (((item.snapshot >> slot) & 1u) == 0) return;
    const std::uint64_t data = internals(view).data_address(item.block);
    warm_fields(data, slot, std::make_integer_sequence<int, all_field_types_t<C>::size>{});
#else
    (void)tid;
    (void)item;
#endif
  }
  SOAHEAP_HD static void warm_line(std::uint64_t address) {
#if SOAHEAP_DEVICE_CODE
    asm volatile("prefetch.global.L2 [%0];" ::"l"(address));
#else
    (void)address;
#endif
  }
  template <int... Fields>
  SOAHEAP_HD static void warm_fields(std::uint64_t data, int slot, std::integer_sequence<int, Fields...>) {
#if SOAHEAP_DEVICE_CODE
    (warm_line(data + soa_array_offset<all_field_types_t<C>, Fields>(kCapacity) +
               static_cast<std::uint64_t>(slot) * sizeof(type_at_t<all_field_types_t<C>, Fields>)),
     ...);
#else
    (void)data;
    (void)slot;
#endif
  }
};

/// parallel_do over several concrete classes as ONE method launch (Executor::launch_summed): the
/// classes' lists laid end to end, thread tid serving item tid of that sequence; each list's length
/// is read on the device. Parts are ParallelDoKernels; made by concatenate_lists.
template <class... Parts>
struct ConcatenatedLists {
  SOAHEAP_HD std::uint64_t total() const { return 0; }
  SOAHEAP_HD void operator()(std::uint64_t) const {}
};
template <class First, class... Rest>
struct ConcatenatedLists<First, Rest...> {
  First first;
  const std::uint64_t* count;  ///< blocks in First's list
  ConcatenatedLists<Rest...> rest;
  SOAHEAP_HD std::uint64_t items() const { return atomic_load(count) * static_cast<std::uint64_t>(First::kCapacity); }
  SOAHEAP_HD std::uint64_t total() const { return items() + rest.total(); }
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t own = items();
    if (tid < own) {
      first(tid);
    } else {
      rest(tid - own);
    }
  }
};
template <class First, class... Rest>
SOAHEAP_HD ConcatenatedLists<First, Rest...> concatenate_lists(const First& first, const std::uint64_t* count,
                                                               const ConcatenatedLists<Rest...>& rest) {
  return {first, count, rest};
}

/// parallel_new: thread i constructs T(i, arguments...).
template <class View, class T, class Arguments>
struct ParallelNewKernel {
  View view;
  Arguments arguments;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    arguments.apply([&](const auto&... values) { new (view) T(index, values...); });
  }
};

/// Counts per class: allocated blocks, used slots, active blocks, candidates (4 counters per class).
/// Launched with block_counting_threads(view.block_count) threads.
template <class View>
struct StatisticsKernel {
  static constexpr int kCounters = 4;
  View view;
  std::uint64_t* counters;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const BitmapView free_blocks = view.free_blocks();
    count_blocks<View::kClassCount * kCounters>(tid, view.block_count, counters, [&](std::uint64_t block, std::uint64_t* local) {
      if (free_blocks.get(block)) return;
      const std::uint32_t class_index = atomic_load(&view.headers[block].class_id);
      if (class_index >= static_cast<std::uint32_t>(View::kClassCount)) return;
      const int c = static_cast<int>(class_index);
      local[c * kCounters + 0] += 1;
      local[c * kCounters + 1] += popcount(atomic_load(&view.headers[block].allocation) & View::full_mask(c));
      local[c * kCounters + 2] += view.active_blocks(c).get(block) ? 1 : 0;
      local[c * kCounters + 3] += view.defrag_candidates(c).get(block) ? 1 : 0;
    });
  }
};

/// Recomputes defrag[c] of every block after the defragmentation factor of class c changed.
template <class View>
struct RebuildCandidatesKernel {
  View view;
  int class_index;
  SOAHEAP_HD void operator()(std::uint64_t block) const {
    if (!view.allocated_blocks(class_index).get(block)) {
      view.defrag_candidates(class_index).clear(block);
      return;
    }
    const int fill = popcount(view.headers[block].allocation & View::full_mask(class_index));
    view.defrag_candidates(class_index).assign(block, fill <= view.defrag_threshold(class_index));
  }
};

/// Stream-compaction predicate: is bit i of a bitmap's level 0 set?
struct BitIsSet {
  BitmapView bitmap;
  SOAHEAP_HD bool operator()(std::uint32_t index) const { return (*bitmap.level0_word(index / 64) >> (index % 64)) & 1u; }
};

}  // namespace soaheap::detail
