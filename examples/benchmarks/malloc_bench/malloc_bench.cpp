// malloc_bench: untyped memory of soaheap (soaheap::malloc/free, DeviceList) against the platform
// allocator on the same workload in the same run (CUDA device malloc/free on cuda, std::malloc on
// host). One JSON line per measurement, then one line of speedups per workload:
//   - every thread allocates one block of B bytes (B = 16 .. 8192, or mixed 16 .. 4096) for
//     2^10 .. 2^20 threads, either allocate-then-free (two kernels) or interleaved (one kernel in
//     which each thread allocates, writes and frees several times);
//   - fill: threads allocate mixed sizes until their first failure; the heap's utilization then, and
//     when the first request of all failed (a request over half a block, which needs contiguous
//     free blocks, may fail long before the threads' last ones);
//   - DeviceList: every thread appends k values one push_back at a time, or with one aggregated append(k).

#include "examples/common/cli.cuh"

#include <soaheap/soaheap.cuh>

#include <nlohmann/json.hpp>

#include <soaheap/core/device_list.cuh>
#include <soaheap/core/untyped_memory.cuh>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace malloc_bench {

inline constexpr std::uint64_t kMixedMin = 16;
inline constexpr std::uint64_t kMixedMax = 4096;
inline constexpr int kInterleavedRounds = 4;
inline constexpr std::uint64_t kFillAttemptsPerThread = 64;
inline constexpr std::uint64_t kListValuesPerThread = 8;
/// A workload uses at most this share of the heap (the rest absorbs size-class rounding).
inline constexpr double kMaxHeapShare = 0.6;

/// Words of the benchmark's two classes (below).
inline constexpr int kRecordValues = 8;
inline constexpr int kWideRecordValues = 32;

/// A managed class of @p kValues 64-bit words. Record (8 words, 64 bytes) is the heap's one class:
/// blocks hold 4 KiB and untyped chunks run 64 B .. 4 KiB. WideRecord (32 words, 256 bytes: 16 KiB
/// blocks) is for the utilization measurement with larger blocks (with one size class per block,
/// requests between half a block and a block take a whole block).
template <int kValues>
class RecordOf : public soaheap::Object<RecordOf<kValues>> {
 public:
  using FieldTypes = soaheap::fields<soaheap::array<std::uint64_t, kValues>>;
  static constexpr const char* kName = kValues == kRecordValues ? "Record" : "WideRecord";
  soaheap::Field<RecordOf, 0> values;
};
using Record = RecordOf<kRecordValues>;
using WideRecord = RecordOf<kWideRecordValues>;
using BenchHeap = soaheap::Heap<Record>;
using WideHeap = soaheap::Heap<WideRecord>;
using View = BenchHeap::View;
using List = soaheap::DeviceList<std::uint64_t, BenchHeap>;

/// Request size of thread @p tid in round @p round: fixed, or (bytes == 0) mixed over [16, 4096].
SOAHEAP_HD inline std::uint64_t request_bytes(std::uint64_t bytes, std::uint64_t tid, std::uint64_t round) {
  if (bytes != 0) return bytes;
  return kMixedMin + soaheap::detail::mix_seed(tid * 1000003u + round * 7919u) % (kMixedMax - kMixedMin + 1);
}

/// Both allocators behind one interface for the kernels.
template <class HeapView = View>
struct SoaheapAllocator {
  HeapView heap;
  // Forced inline, like the functors below that call it, as soaheap::malloc is: nvcc otherwise
  // compiles a function that holds malloc's whole inlined path out of line, and each thread copies
  // the heap view to local memory and calls it (docs/performance-guide.md).
  SOAHEAP_HD SOAHEAP_FORCE_INLINE void* allocate(std::uint64_t bytes) const { return soaheap::malloc(heap, bytes); }
  SOAHEAP_HD SOAHEAP_FORCE_INLINE void release(void* pointer) const { soaheap::free(heap, pointer); }
};
struct PlatformAllocator {
  SOAHEAP_HD void* allocate(std::uint64_t bytes) const { return ::malloc(bytes); }
  SOAHEAP_HD void release(void* pointer) const { ::free(pointer); }
};

template <class Allocator>
struct AllocateOne {
  Allocator allocator;
  std::uint64_t bytes;
  void** slots;
  std::uint64_t* failures;
  SOAHEAP_HD SOAHEAP_FORCE_INLINE void operator()(std::uint64_t tid) const {
    void* memory = allocator.allocate(request_bytes(bytes, tid, 0));
    if (memory == nullptr) soaheap::detail::atomic_fetch_add(failures, 1);
    else *static_cast<std::uint64_t*>(memory) = tid;  // touch it, as a user would
    slots[tid] = memory;
  }
};
template <class Allocator>
struct FreeOne {
  Allocator allocator;
  void** slots;
  SOAHEAP_HD SOAHEAP_FORCE_INLINE void operator()(std::uint64_t tid) const {
    if (slots[tid] != nullptr) allocator.release(slots[tid]);
  }
};
/// What a row's launches cost without allocating: the same kernel parameters (the allocator's heap
/// view) and a read of each thread's slot, so that launch, parameter copy and the wait for the
/// kernel are timed as AllocateOne and FreeOne time them.
template <class Allocator>
struct ReadSlotOnly {
  Allocator allocator;
  void** slots;
  std::uint64_t* failures;
  SOAHEAP_HD SOAHEAP_FORCE_INLINE void operator()(std::uint64_t tid) const {
    if (slots[tid] == static_cast<void*>(failures)) soaheap::detail::atomic_fetch_add(failures, 1);  // never
  }
};
template <class Allocator>
struct Interleaved {
  Allocator allocator;
  std::uint64_t bytes;
  std::uint64_t* failures;
  SOAHEAP_HD SOAHEAP_FORCE_INLINE void operator()(std::uint64_t tid) const {
    for (int round = 0; round < kInterleavedRounds; ++round) {
      void* memory = allocator.allocate(request_bytes(bytes, tid, static_cast<std::uint64_t>(round)));
      if (memory == nullptr) {
        soaheap::detail::atomic_fetch_add(failures, 1);
        continue;
      }
      *static_cast<std::uint64_t*>(memory) = tid;
      allocator.release(memory);
    }
  }
};
/// The fill's two counters: the bytes handed out, and how many had been handed out when the first
/// request failed (0 until one fails).
struct FillCounters {
  std::uint64_t requested;
  std::uint64_t at_first_failure;
};
/// Allocates mixed sizes until the first failure; counts the bytes it got as it goes, so that the
/// first failure can record the heap's use at that moment.
template <class Allocator>
struct FillUntilFailure {
  Allocator allocator;
  FillCounters* counters;
  SOAHEAP_HD SOAHEAP_FORCE_INLINE void operator()(std::uint64_t tid) const {
    for (std::uint64_t attempt = 0; attempt < kFillAttemptsPerThread; ++attempt) {
      const std::uint64_t bytes = request_bytes(0, tid, attempt);
      if (allocator.allocate(bytes) == nullptr) {
        soaheap::detail::atomic_cas(&counters->at_first_failure, 0, soaheap::detail::atomic_load(&counters->requested));
        break;
      }
      soaheap::detail::atomic_fetch_add(&counters->requested, bytes);
    }
  }
};
struct PushBackEach {
  List::View list;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    for (std::uint64_t k = 0; k < kListValuesPerThread; ++k) list.push_back(tid * kListValuesPerThread + k);
  }
};
struct AppendAggregated {
  List::View list;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t first = list.append(kListValuesPerThread);
    if (first == List::View::kNoIndex) return;
    for (std::uint64_t k = 0; k < kListValuesPerThread; ++k) list[first + k] = tid * kListValuesPerThread + k;
  }
};

template <class Body>
double timed_ms(const soaheap::detail::Executor& executor, std::uint64_t count, const Body& body) {
  const auto start = std::chrono::steady_clock::now();
  executor.run(count, body);  // launches and waits
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

/// Reports what soaheap recorded: an out-of-memory is an expected outcome here (counted as failures).
void settle(BenchHeap& heap) {
  try {
    heap.synchronize();
  } catch (const soaheap::out_of_memory&) {
  }
}

std::vector<std::uint64_t> parse_list(const std::string& text, const char* option) {
  std::vector<std::uint64_t> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item == "mixed") {
      values.push_back(0);
      continue;
    }
    char* end = nullptr;
    const unsigned long long value = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value == 0)
      throw soaheap::invalid_argument(std::string(option) + ": '" + item + "' is not a positive integer");
    values.push_back(value);
  }
  if (values.empty()) throw soaheap::invalid_argument(std::string(option) + ": no values given");
  return values;
}

struct Context {
  BenchHeap& heap;
  soaheap::Backend backend;
  std::string platform_name;
  soaheap::detail::Memory& slots;
  soaheap::detail::Memory& counter;
};

nlohmann::json base_line(const Context& context, const char* allocator, const std::string& workload) {
  return {{"bench", "malloc_bench"},
          {"allocator", allocator},
          {"backend", std::string(soaheap::to_string(context.backend))},
          {"workload", workload}};
}

std::uint64_t read_counter(const Context& context) {
  std::uint64_t value = 0;
  context.counter.copy_to_host(&value, 0, sizeof(value));
  return value;
}

/// A fill's counters as the result line reports them, against a heap of @p capacity_bytes.
void report_fill(nlohmann::json& line, const FillCounters& counters, std::uint64_t capacity_bytes) {
  line["bytes_requested"] = counters.requested;
  line["capacity_bytes"] = capacity_bytes;
  line["utilization"] = static_cast<double>(counters.requested) / static_cast<double>(capacity_bytes);
  line["first_failure_utilization"] = static_cast<double>(counters.at_first_failure) / static_cast<double>(capacity_bytes);
}

/// One workload on one allocator, @p repeats times (each leaves the heap as it found it); prints the
/// best run and the first, and returns the best run's total milliseconds.
template <class Allocator>
double measure(Context& context, const Allocator& allocator, const char* name, std::uint64_t bytes,
               std::uint64_t threads, bool interleaved, int repeats) {
  const soaheap::detail::Executor& executor = context.heap.executor();
  context.counter.fill_zero();
  const std::uint64_t operations = interleaved ? threads * kInterleavedRounds : threads;
  double best_alloc_ms = 0, best_free_ms = 0, first_ms = 0, floor_ms = 0;
  for (int run = 0; run < repeats; ++run) {
    double alloc_ms = 0;
    double free_ms = 0;
    if (interleaved) {
      alloc_ms = timed_ms(executor, threads, Interleaved<Allocator>{allocator, bytes, context.counter.as<std::uint64_t>()});
    } else {
      alloc_ms = timed_ms(executor, threads,
                          AllocateOne<Allocator>{allocator, bytes, context.slots.as<void*>(), context.counter.as<std::uint64_t>()});
      free_ms = timed_ms(executor, threads, FreeOne<Allocator>{allocator, context.slots.as<void*>()});
    }
    const double launch_ms =
        timed_ms(executor, threads, ReadSlotOnly<Allocator>{allocator, context.slots.as<void*>(), context.counter.as<std::uint64_t>()});
    if (run == 0 || launch_ms < floor_ms) floor_ms = launch_ms;
    if (run == 0) first_ms = alloc_ms + free_ms;
    if (run == 0 || alloc_ms + free_ms < best_alloc_ms + best_free_ms) best_alloc_ms = alloc_ms, best_free_ms = free_ms;
  }
  settle(context.heap);
  nlohmann::json line = base_line(context, name, interleaved ? "interleaved" : "alloc_then_free");
  line["bytes"] = bytes == 0 ? nlohmann::json("mixed") : nlohmann::json(bytes);
  line["threads"] = threads;
  line["runs"] = repeats;
  line["alloc_ms"] = best_alloc_ms;
  line["free_ms"] = best_free_ms;
  line["total_ms"] = best_alloc_ms + best_free_ms;
  // The best launch of a kernel that only reads its slot: each of the two kernels pays it.
  line["launch_floor_ms"] = floor_ms;
  line["ns_per_allocation"] = (best_alloc_ms + best_free_ms) * 1e6 / static_cast<double>(operations);
  line["first_ns_per_allocation"] = first_ms * 1e6 / static_cast<double>(operations);
  line["failed_allocations"] = read_counter(context);
  std::cout << line.dump() << std::endl;
  return best_alloc_ms + best_free_ms;
}

/// Runs the fill with @p allocator on @p threads threads; its time and counters.
template <class Allocator>
std::pair<double, FillCounters> run_fill(const soaheap::detail::Executor& executor, soaheap::Backend backend,
                                         std::uint64_t threads, const Allocator& allocator) {
  soaheap::detail::Memory memory(backend, sizeof(FillCounters));
  memory.fill_zero();
  const double ms = timed_ms(executor, threads, FillUntilFailure<Allocator>{allocator, memory.as<FillCounters>()});
  FillCounters counters{};
  memory.copy_to_host(&counters, 0, sizeof(counters));
  return {ms, counters};
}

/// Fills a fresh heap of type HeapType with mixed sizes until the threads' first failures.
template <class HeapType>
void measure_fill(const Context& context, const soaheap::HeapOptions& options, std::uint64_t threads) {
  HeapType heap(options);
  const std::uint64_t capacity_bytes = heap.block_count() * HeapType::block_bytes();
  using Allocator = SoaheapAllocator<typename HeapType::View>;
  const auto [ms, counters] = run_fill(heap.executor(), context.backend, threads, Allocator{heap.view()});
  try {
    heap.synchronize();
  } catch (const soaheap::out_of_memory&) {  // the point of the exercise
  }
  const soaheap::HeapStats stats = heap.stats();
  nlohmann::json line = base_line(context, "soaheap", "fill_until_failure");
  line["bytes"] = "mixed";
  line["block_bytes"] = HeapType::block_bytes();
  line["threads"] = threads;
  line["fill_ms"] = ms;
  report_fill(line, counters, capacity_bytes);
  line["bytes_reserved"] = stats.untyped.bytes_reserved();
  line["reserved_share"] = static_cast<double>(stats.untyped.bytes_reserved()) / static_cast<double>(capacity_bytes);
  std::cout << line.dump() << std::endl;
}

/// The same fill against the platform allocator, whose heap is @p capacity_bytes (never freed after).
void measure_platform_fill(Context& context, std::uint64_t threads, std::uint64_t capacity_bytes) {
  const auto [ms, counters] = run_fill(context.heap.executor(), context.backend, threads, PlatformAllocator{});
  nlohmann::json line = base_line(context, context.platform_name.c_str(), "fill_until_failure");
  line["bytes"] = "mixed";
  line["threads"] = threads;
  line["fill_ms"] = ms;
  report_fill(line, counters, capacity_bytes);
  std::cout << line.dump() << std::endl;
}

int run(int argc, char** argv) {
  soaheap_app::Cli cli("malloc_bench: soaheap::malloc/free and DeviceList vs the platform allocator (JSON lines)");
  // The default run is a short one (well under a minute on an H100, CUDA's malloc included);
  // --full sweeps every size and thread count of the README's table. Empty lists: not given.
  std::string sizes_text;
  std::string threads_text;
  bool full = false;
  std::string backend_name;
  unsigned long long heap_mib = 0;
  unsigned host_threads = 0;
  bool skip_platform = false;
  int repeats = 3;
  cli.option("--sizes", sizes_text,
             "Comma-separated request sizes in bytes, 'mixed' for 16..4096 (default: 16,256,4096,mixed)");
  cli.option("--threads", threads_text, "Comma-separated thread counts (default: 16384,131072)");
  cli.backend(backend_name, soaheap::cuda_available());
  cli.option("--heap-mib", heap_mib, "Heap size in MiB (default: 4096 on cuda, 256 on host)");
  cli.option("--host-threads", host_threads, "Worker threads of the host backend (0 = all cores)");
  cli.flag("--no-platform", skip_platform, "Measure soaheap only");
  cli.option("--repeats", repeats, "Runs of each workload: the best is reported, and the first beside it", 1, 100);
  cli.flag("--full", full,
           "The whole sweep: sizes 16,64,256,1024,4096,8192,mixed and threads 1024,16384,131072,1048576 "
           "(several minutes); --sizes and --threads given explicitly still win");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  if (sizes_text.empty()) sizes_text = full ? "16,64,256,1024,4096,8192,mixed" : "16,256,4096,mixed";
  if (threads_text.empty()) threads_text = full ? "1024,16384,131072,1048576" : "16384,131072";
  const std::vector<std::uint64_t> sizes = parse_list(sizes_text, "--sizes");
  const std::vector<std::uint64_t> thread_counts = parse_list(threads_text, "--threads");
  const soaheap::Backend backend = soaheap::parse_backend(backend_name);
  if (heap_mib == 0) heap_mib = backend == soaheap::Backend::cuda ? 4096 : 256;

  soaheap::HeapOptions options;
  options.bytes = heap_mib << 20;
  options.backend = backend;
  options.host_threads = host_threads;
  BenchHeap heap(options);
  const std::uint64_t data_bytes = heap.block_count() * BenchHeap::block_bytes();
#if SOAHEAP_HAS_CUDA
  if (backend == soaheap::Backend::cuda) SOAHEAP_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, data_bytes));
#endif
  const std::uint64_t max_threads = *std::max_element(thread_counts.begin(), thread_counts.end());
  soaheap::detail::Memory slots(backend, max_threads * sizeof(void*));
  soaheap::detail::Memory counter(backend, sizeof(std::uint64_t));
  Context context{heap, backend, backend == soaheap::Backend::cuda ? "cuda_malloc" : "std_malloc", slots, counter};
  const SoaheapAllocator<> ours{heap.view()};
  const PlatformAllocator platform{};

  for (const bool interleaved : {false, true}) {
    for (std::uint64_t bytes : sizes) {
      for (std::uint64_t threads : thread_counts) {
        const std::uint64_t largest = bytes == 0 ? kMixedMax : bytes;
        if (static_cast<double>(threads * largest) > kMaxHeapShare * static_cast<double>(data_bytes)) {
          std::cout << nlohmann::json{{"bench", "malloc_bench"}, {"skipped", true}, {"bytes", bytes},
                                      {"threads", threads}, {"reason", "workload larger than the heap share"}}
                           .dump()
                    << std::endl;
          continue;
        }
        const double our_ms = measure(context, ours, "soaheap", bytes, threads, interleaved, repeats);
        if (skip_platform) continue;
        const double platform_ms = measure(context, platform, context.platform_name.c_str(), bytes, threads, interleaved, repeats);
        nlohmann::json line = base_line(context, "ratio", interleaved ? "interleaved" : "alloc_then_free");
        line["type"] = "speedup";
        line["bytes"] = bytes == 0 ? nlohmann::json("mixed") : nlohmann::json(bytes);
        line["threads"] = threads;
        line["comparison"] = context.platform_name + " / soaheap";
        line["speedup"] = our_ms > 0 ? platform_ms / our_ms : 0.0;
        std::cout << line.dump() << std::endl;
      }
    }
  }

  // Utilization at the first failure with mixed sizes, on fresh heaps of 4 KiB and 16 KiB blocks:
  // as many threads as the run's largest count (at most one per 2 KiB of heap), and at least enough
  // that their attempts ask for twice the heap (fewer never fill it: 1,024 threads on 16 GiB said 0 %).
  constexpr std::uint64_t kFillAsksPerThread = kFillAttemptsPerThread * ((kMixedMin + kMixedMax) / 2);
  const std::uint64_t fill_threads = std::max(std::min<std::uint64_t>(max_threads, data_bytes / 2048),
                                              (2 * data_bytes + kFillAsksPerThread - 1) / kFillAsksPerThread);
  measure_fill<BenchHeap>(context, options, fill_threads);
  measure_fill<WideHeap>(context, options, fill_threads);
  // CUDA's device heap has a fixed size (set to the soaheap data bytes above); the host's has none.
  // The platform's memory from the fill stays allocated: its heap cannot be reset.
  if (!skip_platform && backend == soaheap::Backend::cuda) measure_platform_fill(context, fill_threads, data_bytes);

  // DeviceList: per-thread push_back against one aggregated append per thread (per warp on cuda).
  BenchHeap list_heap(options);
  for (std::uint64_t threads : thread_counts) {
    if (static_cast<double>(threads * kListValuesPerThread * 2 * sizeof(std::uint64_t)) > kMaxHeapShare * static_cast<double>(data_bytes))
      continue;
    double ms[2] = {0, 0};
    for (int aggregated = 0; aggregated < 2; ++aggregated) {
      List list(list_heap);
      ms[aggregated] = aggregated ? timed_ms(list_heap.executor(), threads, AppendAggregated{list.view()})
                                  : timed_ms(list_heap.executor(), threads, PushBackEach{list.view()});
      const std::uint64_t size = list.size();
      nlohmann::json line = base_line(context, "soaheap", aggregated ? "device_list_append" : "device_list_push_back");
      line["threads"] = threads;
      line["values_per_thread"] = kListValuesPerThread;
      line["ms"] = ms[aggregated];
      line["ns_per_value"] = ms[aggregated] * 1e6 / static_cast<double>(threads * kListValuesPerThread);
      line["size_ok"] = size == threads * kListValuesPerThread;
      std::cout << line.dump() << std::endl;
    }
    nlohmann::json line = base_line(context, "ratio", "device_list");
    line["type"] = "speedup";
    line["threads"] = threads;
    line["comparison"] = "push_back / append";
    line["speedup"] = ms[1] > 0 ? ms[0] / ms[1] : 0.0;
    std::cout << line.dump() << std::endl;
  }
  return 0;
}

}  // namespace malloc_bench

int main(int argc, char** argv) {
  return soaheap_app::run_main("malloc_bench", [&] { return malloc_bench::run(argc, argv); });
}
