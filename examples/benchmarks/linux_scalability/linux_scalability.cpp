// The linux-scalability microbenchmark of the DynaSOAr paper (§6.4): T threads each allocate n
// objects of a 64-byte class in one kernel, then a second kernel frees them all. The same workload
// runs against the platform allocator (CUDA device malloc/free on cuda, std::malloc/free on host)
// so that one run gives the ratio. One JSON line per (allocator, n), then one line of ratios.

#include "examples/common/cli.cuh"

#include <soaheap/soaheap.cuh>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace scalability {

inline constexpr std::uint64_t kDefaultThreads = 16384;
inline constexpr std::uint64_t kDefaultMaxN = 1024;
inline constexpr std::uint64_t kObjectBytes = 64;
inline constexpr std::uint64_t kRatioPoints[] = {1, 64, 1024};

/// 64 bytes: eight 64-bit fields.
class Item : public soaheap::Object<Item> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                                     std::uint64_t, std::uint64_t, std::uint64_t>;
  static constexpr const char* kName = "Item";
  soaheap::Field<Item, 0> f0;
  soaheap::Field<Item, 1> f1;
  soaheap::Field<Item, 2> f2;
  soaheap::Field<Item, 3> f3;
  soaheap::Field<Item, 4> f4;
  soaheap::Field<Item, 5> f5;
  soaheap::Field<Item, 6> f6;
  soaheap::Field<Item, 7> f7;
  SOAHEAP_HD explicit Item(std::uint64_t value) {
    f0 = value;
    f1 = f2 = f3 = f4 = f5 = f6 = f7 = 0;
  }
};
static_assert(sizeof(std::uint64_t) * 8 == kObjectBytes, "the benchmark's class is 64 bytes");

using ItemHeap = soaheap::Heap<Item>;
using View = ItemHeap::View;

struct HeapAllocate {
  View heap;
  Item** slots;
  std::uint64_t n;
  std::uint64_t* failures;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    for (std::uint64_t k = 0; k < n; ++k) {
      Item* item = new (heap) Item(tid);
      if (item == nullptr) soaheap::detail::atomic_fetch_add(failures, 1);
      slots[tid * n + k] = item;
    }
  }
};
struct HeapFree {
  View heap;
  Item** slots;
  std::uint64_t n;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    for (std::uint64_t k = 0; k < n; ++k)
      if (slots[tid * n + k] != nullptr) soaheap::destroy(heap, slots[tid * n + k]);
  }
};
/// The platform allocator: device malloc in CUDA kernels, std::malloc on the host.
struct MallocAllocate {
  void** slots;
  std::uint64_t n;
  std::uint64_t* failures;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    for (std::uint64_t k = 0; k < n; ++k) {
      auto* item = static_cast<std::uint64_t*>(malloc(kObjectBytes));
      if (item == nullptr) {
        soaheap::detail::atomic_fetch_add(failures, 1);
      } else {
        item[0] = tid;
      }
      slots[tid * n + k] = item;
    }
  }
};
struct MallocFree {
  void** slots;
  std::uint64_t n;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    for (std::uint64_t k = 0; k < n; ++k) free(slots[tid * n + k]);
  }
};

std::vector<std::uint64_t> parse_n_values(const std::string& text) {
  std::vector<std::uint64_t> values;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    char* end = nullptr;
    const unsigned long long value = std::strtoull(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value == 0)
      throw soaheap::invalid_argument("--n-values: '" + item + "' is not a positive integer");
    values.push_back(value);
  }
  if (values.empty()) throw soaheap::invalid_argument("--n-values: no values given");
  return values;
}

template <class Body>
double timed_ms(const soaheap::detail::Executor& executor, std::uint64_t count, const Body& body) {
  const auto start = std::chrono::steady_clock::now();
  executor.run(count, body);  // synchronizes
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Measurement {
  double alloc_ms = 0;
  double free_ms = 0;
  std::uint64_t failures = 0;
};

nlohmann::json result_line(const char* allocator, soaheap::Backend backend, std::uint64_t threads, std::uint64_t n,
                           const Measurement& m, double heap_utilization) {
  const double allocations = static_cast<double>(threads * n);
  return {{"app", "linux_scalability"},
          {"allocator", allocator},
          {"backend", std::string(soaheap::to_string(backend))},
          {"n", n},
          {"threads", threads},
          {"object_bytes", kObjectBytes},
          {"alloc_kernel_ms", m.alloc_ms},
          {"free_kernel_ms", m.free_ms},
          {"alloc_ms_per_n", m.alloc_ms / static_cast<double>(n)},  // the paper's measure
          {"free_ms_per_n", m.free_ms / static_cast<double>(n)},
          {"ns_per_alloc", m.alloc_ms * 1e6 / allocations},
          {"ns_per_free", m.free_ms * 1e6 / allocations},
          {"heap_utilization", heap_utilization},
          {"failed_allocations", m.failures}};
}

int run(int argc, char** argv) {
  soaheap_app::Cli cli("linux-scalability allocation microbenchmark: soaheap vs the platform allocator (JSON lines)");
  unsigned long long threads = kDefaultThreads;
  std::string n_text;
  std::string backend_name;
  unsigned host_threads = 0;
  cli.option("--threads", threads, "Allocating threads", 1, 1ULL << 40);
  cli.option("--n-values", n_text, "Comma-separated objects per thread (default: powers of two 1..1024)");
  cli.backend(backend_name, soaheap::cuda_available());
  cli.option("--host-threads", host_threads, "Worker threads of the host backend (0 = all cores)");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  std::vector<std::uint64_t> n_values;
  if (n_text.empty()) {
    for (std::uint64_t n = 1; n <= kDefaultMaxN; n *= 2) n_values.push_back(n);
  } else {
    n_values = parse_n_values(n_text);
  }
  std::uint64_t max_n = 0;
  for (std::uint64_t n : n_values) max_n = std::max(max_n, n);

  const soaheap::Backend backend = soaheap::parse_backend(backend_name);
  soaheap::HeapOptions heap_options;
  heap_options.objects = threads * max_n;
  heap_options.backend = backend;
  heap_options.host_threads = host_threads;
  ItemHeap heap(heap_options);
#if SOAHEAP_HAS_CUDA
  if (backend == soaheap::Backend::cuda)
    SOAHEAP_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap.heap_bytes()));
#endif
  const soaheap::detail::Executor& executor = heap.executor();
  soaheap::detail::Memory slots(backend, threads * max_n * sizeof(void*));
  soaheap::detail::Memory failures(backend, sizeof(std::uint64_t));

  std::map<std::uint64_t, std::pair<Measurement, Measurement>> by_n;  // soaheap, platform
  bool all_succeeded = true;
  for (std::uint64_t n : n_values) {
    Measurement ours;
    failures.fill_zero();
    ours.alloc_ms = timed_ms(executor, threads, HeapAllocate{heap.view(), slots.as<Item*>(), n, failures.as<std::uint64_t>()});
    heap.throw_recorded_error();
    const std::uint64_t live_bytes = heap.stats().classes[0].used_slots * kObjectBytes;
    failures.copy_to_host(&ours.failures, 0, sizeof(std::uint64_t));
    ours.free_ms = timed_ms(executor, threads, HeapFree{heap.view(), slots.as<Item*>(), n});
    heap.throw_recorded_error();
    std::cout << result_line("soaheap", backend, threads, n, ours,
                             static_cast<double>(live_bytes) / static_cast<double>(heap.heap_bytes()))
                     .dump()
              << std::endl;

    Measurement platform;
    failures.fill_zero();
    platform.alloc_ms = timed_ms(executor, threads, MallocAllocate{slots.as<void*>(), n, failures.as<std::uint64_t>()});
    failures.copy_to_host(&platform.failures, 0, sizeof(std::uint64_t));
    platform.free_ms = timed_ms(executor, threads, MallocFree{slots.as<void*>(), n});
    const std::uint64_t platform_live = (threads * n - platform.failures) * kObjectBytes;
    std::cout << result_line(backend == soaheap::Backend::cuda ? "cuda_malloc" : "std_malloc", backend, threads, n,
                             platform, static_cast<double>(platform_live) / static_cast<double>(heap.heap_bytes()))
                     .dump()
              << std::endl;
    all_succeeded = all_succeeded && ours.failures == 0;
    by_n[n] = {ours, platform};
  }

  nlohmann::json ratios = nlohmann::json::object();
  for (std::uint64_t n : kRatioPoints) {
    const auto found = by_n.find(n);
    if (found == by_n.end()) continue;
    const Measurement& ours = found->second.first;
    const Measurement& platform = found->second.second;
    ratios[std::to_string(n)] = {{"alloc_speedup", ours.alloc_ms > 0 ? platform.alloc_ms / ours.alloc_ms : 0.0},
                                 {"free_speedup", ours.free_ms > 0 ? platform.free_ms / ours.free_ms : 0.0}};
  }
  std::cout << nlohmann::json{{"app", "linux_scalability"},
                              {"type", "ratios"},
                              {"backend", std::string(soaheap::to_string(backend))},
                              {"threads", threads},
                              {"comparison", backend == soaheap::Backend::cuda ? "cuda_malloc / soaheap" : "std_malloc / soaheap"},
                              {"speedup_by_n", ratios},
                              {"self_check", all_succeeded ? "passed" : "failed"}}
                   .dump()
            << std::endl;
  return all_succeeded ? 0 : 1;
}

}  // namespace scalability

int main(int argc, char** argv) {
  return soaheap_app::run_main("linux_scalability", [&] { return scalability::run(argc, argv); });
}
