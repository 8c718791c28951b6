// defrag_bench: CompactGpu's synthetic benchmark (ISMM 2019, Table 1 and Figure 9).
//
// Two classes of 32-byte objects point at each other at random. A share of one class is deleted,
// then that class is defragmented with k1 = 0. Each run uses a fresh heap and prints one JSON line.
//
//   defrag_bench [--backend cuda|host] [--objects N] [--delete-percent 60] [--factors 1,2,3,4,5]
//                [--compaction both|plan|passes] [--strategy both|forwarding|records]
//                [--target bound|minimum] [--locality-window W] [--mode table1|figure9] [--seed S]
//                [--order none|key|field]
//
// --order compacts in an order (ordered compaction: ceil(live/N) fresh blocks, objects sorted):
// "key" by a hash of each object's payload (a random permutation, the worst case for the copy),
// "field" by the address of the BenchB its pointer names (also random here).
// Every (deletion, n) is run with each compaction strategy on a fresh heap (same seed, so the same
// graph), one JSON line per run, then one "comparison" line that puts plan and passes side by side.
//
// Bandwidths count bytes read plus bytes written, for the device-to-device copy measured first as
// for the phases: copy = 2 x bytes moved; rewrite = pointer-field bytes scanned in every pass plus a
// read and a write of 8 bytes per relocated object (each object here has one referrer on average).
#include "examples/common/cli.cuh"

#include <soaheap/soaheap.cuh>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

/// The benchmark's two classes, BenchA (side 0) and BenchB (side 1): 32 bytes each, a pointer to an
/// object of the other class and 24 bytes of payload, so that defragmenting one class rewrites the
/// pointers held by the other.
template <int Side>
class BenchObject : public soaheap::Object<BenchObject<Side>> {
 public:
  using FieldTypes = soaheap::fields<BenchObject<1 - Side>*, std::uint64_t, std::uint64_t, std::uint64_t>;
  static constexpr const char* kName = Side == 0 ? "BenchA" : "BenchB";
  soaheap::Field<BenchObject, 0> other;
  soaheap::Field<BenchObject, 1> payload0;
  soaheap::Field<BenchObject, 2> payload1;
  soaheap::Field<BenchObject, 3> payload2;

  // A user-provided constructor: `new (heap) T()` on a class without one would value-initialize,
  // i.e. zero the C++ object at its tagged address, which is no memory address at all.
  SOAHEAP_HD explicit BenchObject(std::uint64_t index) {
    other = nullptr;
    payload0 = index;
    payload1 = 2 * index;
    payload2 = 3 * index;
  }
};

using BenchA = BenchObject<0>;
using BenchB = BenchObject<1>;

using BenchHeap = soaheap::Heap<BenchA, BenchB>;

/// A random order: a hash of the first payload word (the object's creation index).
struct PayloadHash {
  SOAHEAP_HD std::uint64_t operator()(const BenchA* object) const {
    std::uint64_t x = object->payload0.get() * 0x9e3779b97f4a7c15ULL;
    return x ^ (x >> 29);
  }
};
using BenchView = BenchHeap::View;

constexpr std::uint64_t kPercentScale = 10000;  // deletion decided in 1/100 of a percent

SOAHEAP_HD inline std::uint64_t bench_hash(std::uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

struct Deletion {
  std::uint64_t seed;
  std::uint64_t threshold;  // of kPercentScale
  SOAHEAP_HD bool deleted(std::uint64_t index) const {
    return bench_hash(index ^ (seed << 40)) % kPercentScale < threshold;
  }
};

struct CreateObjects {
  BenchView heap;
  BenchA** as;
  BenchB** bs;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    as[i] = new (heap) BenchA(i);
    bs[i] = new (heap) BenchB(i);
  }
};

/// Random links; pointers to A only name survivors of the deletion (so nothing dangles).
struct LinkObjects {
  BenchView heap;
  BenchA** as;
  BenchB** bs;
  std::uint64_t count;
  Deletion deletion;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    as[i]->other = bs[bench_hash(i * 2 + 1) % count];
    BenchA* target = nullptr;
    if (deletion.threshold < kPercentScale) {
      for (std::uint64_t attempt = 0; target == nullptr; ++attempt) {
        const std::uint64_t j = bench_hash(i * 2 + (attempt << 40)) % count;
        if (!deletion.deleted(j)) target = as[j];
      }
    }
    bs[i]->other = target;
  }
};

struct DeleteObjects {
  BenchView heap;
  BenchA** as;
  Deletion deletion;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    if (deletion.deleted(i)) soaheap::destroy(heap, as[i]);
  }
};

/// Device-to-device (or host memcpy) bandwidth in GB/s, counting bytes read plus written.
double measure_copy_bandwidth(soaheap::Backend backend, std::uint64_t bytes) {
  soaheap::detail::Memory source(backend, bytes);
  soaheap::detail::Memory destination(backend, bytes);
  source.fill_byte(1);
  destination.fill_zero();
  constexpr int kRepetitions = 5;
  double best_seconds = 1e30;
  for (int repetition = 0; repetition <= kRepetitions; ++repetition) {
    const auto start = std::chrono::steady_clock::now();
    if (backend == soaheap::Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemcpy(destination.get(), source.get(), bytes, cudaMemcpyDeviceToDevice));
      SOAHEAP_CUDA_CHECK(cudaDeviceSynchronize());
#endif
    } else {
      // As many threads as the host backend would use, each copying a contiguous chunk.
      const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
      std::vector<std::thread> workers;
      const std::uint64_t chunk = (bytes + threads - 1) / threads;
      for (unsigned t = 0; t < threads; ++t) {
        const std::uint64_t begin = std::min<std::uint64_t>(bytes, t * chunk);
        const std::uint64_t end = std::min<std::uint64_t>(bytes, begin + chunk);
        workers.emplace_back([&, begin, end] {
          std::memcpy(destination.as<char>() + begin, source.as<char>() + begin, end - begin);
        });
      }
      for (auto& worker : workers) worker.join();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (repetition > 0) best_seconds = std::min(best_seconds, seconds);  // the first run warms up
  }
  return 2.0 * static_cast<double>(bytes) / best_seconds / 1e9;
}

struct RunSettings {
  soaheap::Backend backend;
  std::uint64_t objects;
  double delete_percent;
  int factor;
  soaheap::RewriteStrategy strategy;
  soaheap::CompactionStrategy compaction;
  soaheap::DefragTarget target;
  std::uint64_t locality_window;
  std::uint64_t seed;
  bool validate;
  std::string order;  ///< none, key or field
};

nlohmann::json run_once(const RunSettings& settings, double copy_bandwidth_gbs) {
  soaheap::HeapOptions options;
  options.backend = settings.backend;
  // Room for both classes, and slack for the partly filled blocks that concurrent (warp-coalesced)
  // allocation leaves behind.
  options.objects = settings.objects * 5 / 2 + 64 * 1024;
  BenchHeap heap(options);
  const std::uint64_t count = settings.objects;
  soaheap::detail::Memory as(settings.backend, count * sizeof(BenchA*));
  soaheap::detail::Memory bs(settings.backend, count * sizeof(BenchB*));
  const Deletion deletion{settings.seed, static_cast<std::uint64_t>(settings.delete_percent * 100.0 + 0.5)};
  heap.launch(count, CreateObjects{heap.view(), as.as<BenchA*>(), bs.as<BenchB*>()});
  heap.launch(count, LinkObjects{heap.view(), as.as<BenchA*>(), bs.as<BenchB*>(), count, deletion});
  heap.launch(count, DeleteObjects{heap.view(), as.as<BenchA*>(), deletion});
  const std::uint64_t live_a = heap.count<BenchA>();
  const std::uint64_t live_b = heap.count<BenchB>();

  soaheap::DefragOptions defrag;
  defrag.factor = settings.factor;
  defrag.retained_candidates = 0;
  defrag.strategy = settings.strategy;
  defrag.compaction = settings.compaction;
  defrag.target = settings.target;
  defrag.locality_window = settings.compaction == soaheap::CompactionStrategy::plan ? settings.locality_window : 0;
  soaheap::DefragResult result;
  if (settings.order == "key") {
    result = soaheap::defragment<BenchA>(heap, defrag, soaheap::order_by_key(PayloadHash{}));
  } else if (settings.order == "field") {
    result = soaheap::defragment<BenchA>(heap, defrag, soaheap::order_by_pointer_field<&BenchA::other>());
  } else {
    result = soaheap::defragment<BenchA>(heap, defrag);
  }
  if (settings.validate) heap.validate(soaheap::Validation::full);

  const double copy_bytes = 2.0 * static_cast<double>(result.bytes_moved);
  const double rewrite_bytes = static_cast<double>(result.passes) * static_cast<double>(live_b) * sizeof(BenchA*) +
                               2.0 * sizeof(BenchA*) * static_cast<double>(result.objects_moved);
  auto gbs = [](double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0; };
  nlohmann::json line;
  line["backend"] = std::string(soaheap::to_string(settings.backend));
  line["objects_per_class"] = count;
  line["delete_percent"] = settings.delete_percent;
  line["n"] = settings.factor;
  line["strategy"] = settings.strategy == soaheap::RewriteStrategy::records ? "records" : "forwarding_pointers";
  line["compaction"] = soaheap::to_string(settings.compaction);
  line["target"] = settings.target == soaheap::DefragTarget::minimum ? "minimum" : "bound";
  line["locality_window"] = defrag.locality_window;
  line["order"] = settings.order;
  line["live_a"] = live_a;
  line["live_b"] = live_b;
  line["passes"] = result.passes;
  line["relocations"] = result.objects_moved;
  line["blocks_freed"] = result.blocks_freed;
  line["bytes_moved"] = result.bytes_moved;
  line["candidates_before"] = result.candidates_before;
  line["candidates_after"] = result.candidates_after;
  line["fragmentation_before"] = result.fragmentation_before;
  line["fragmentation_after"] = result.fragmentation_after;
  line["blocks_before"] = result.blocks_before;
  line["blocks_after"] = result.blocks_after;
  line["minimum_blocks"] = result.minimum_blocks;
  line["scan_ms"] = result.times.scan_ms;
  line["copy_ms"] = result.times.copy_ms;
  line["forward_ms"] = result.times.forward_ms;
  line["rewrite_ms"] = result.times.rewrite_ms;
  line["state_ms"] = result.times.state_ms;
  line["order_ms"] = result.times.order_ms;
  line["total_ms"] = result.times.total_ms();
  line["copy_gbs"] = gbs(copy_bytes, result.times.copy_ms);
  line["rewrite_gbs"] = gbs(rewrite_bytes, result.times.rewrite_ms);
  line["device_copy_gbs"] = copy_bandwidth_gbs;
  line["copy_bandwidth_fraction"] = gbs(copy_bytes, result.times.copy_ms) / copy_bandwidth_gbs;
  line["rewrite_bandwidth_fraction"] = gbs(rewrite_bytes, result.times.rewrite_ms) / copy_bandwidth_gbs;
  line["validated"] = settings.validate;
  return line;
}

/// One line with the plan run and the passes run side by side.
nlohmann::json comparison(const nlohmann::json& plan, const nlohmann::json& passes) {
  nlohmann::json line;
  line["comparison"] = "plan_vs_passes";
  for (const char* key : {"mode", "backend", "delete_percent", "n", "strategy", "minimum_blocks"}) line[key] = plan[key];
  for (const char* key : {"passes", "relocations", "total_ms", "scan_ms", "copy_ms", "forward_ms", "rewrite_ms",
                          "state_ms", "copy_bandwidth_fraction", "rewrite_bandwidth_fraction", "fragmentation_after",
                          "blocks_after"}) {
    line[std::string("plan_") + key] = plan[key];
    line[std::string("passes_") + key] = passes[key];
  }
  const double plan_ms = plan["total_ms"].get<double>();
  line["speedup"] = plan_ms > 0 ? passes["total_ms"].get<double>() / plan_ms : 0.0;
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  soaheap_app::Cli app("defrag_bench: CompactGpu's synthetic defragmentation benchmark (ISMM 2019 Table 1 / Figure 9)");
  std::string backend_name;
  std::string mode = "table1";
  std::string strategy_name = "both";
  std::string compaction_name = "both";
  std::string target_name = "bound";
  std::uint64_t locality_window = 0;
  std::uint64_t objects = 0;
  double delete_percent = 60;
  std::vector<int> factors = {1, 2, 3, 4, 5};
  std::uint64_t seed = 1;
  bool validate = false;
  std::string order = "none";
  app.backend(backend_name, soaheap::cuda_available());
  app.choice("--mode", mode, "table1: one run per n and strategy; figure9: deletion 0..100 % in 5 % steps",
             {"table1", "figure9"});
  app.option("--objects", objects,
             "objects per class (default 32768000 on cuda, 200000 on host; figure9: 2000000 / 100000)");
  app.option("--delete-percent", delete_percent, "share of class BenchA deleted before defragmenting (table1)", 0.0,
             100.0);
  app.list("--factors", factors, "defragmentation factors n", 1, 63);
  app.choice("--strategy", strategy_name, "rewrite strategy: forwarding, records or both",
             {"both", "forwarding", "records"});
  app.choice("--compaction", compaction_name, "compaction strategy: plan, passes or both (side by side)",
             {"both", "plan", "passes"});
  app.choice("--target", target_name, "bound: the candidates (1/(n+1) guarantee); minimum: ceil(live/N) blocks (plan)",
             {"bound", "minimum"});
  app.option("--locality-window", locality_window,
             "plan: compact windows of W consecutive blocks on their own (0: the whole class)");
  app.option("--seed", seed, "seed of the random links and deletions");
  app.choice("--order", order, "ordered compaction: none, key (a hash) or field (the pointer's target)",
             {"none", "key", "field"});
  app.flag("--validate", validate, "run heap.validate(full) after each defragmentation (slow)");
  if (const auto exit_code = app.parse(argc, argv)) return *exit_code;

  try {
    const soaheap::Backend backend = soaheap::parse_backend(backend_name);
    const bool figure9 = mode == "figure9";
    if (objects == 0)
      objects = backend == soaheap::Backend::cuda ? (figure9 ? 2000000 : 32768000) : (figure9 ? 100000 : 200000);
    std::vector<soaheap::RewriteStrategy> strategies;
    if (strategy_name != "records") strategies.push_back(soaheap::RewriteStrategy::forwarding_pointers);
    if (strategy_name != "forwarding") strategies.push_back(soaheap::RewriteStrategy::records);
    std::vector<soaheap::CompactionStrategy> compactions;
    if (compaction_name != "passes") compactions.push_back(soaheap::CompactionStrategy::plan);
    if (compaction_name != "plan" && target_name != "minimum" && order == "none") compactions.push_back(soaheap::CompactionStrategy::passes);
    const soaheap::DefragTarget target =
        target_name == "minimum" ? soaheap::DefragTarget::minimum : soaheap::DefragTarget::bound;

    // The reference bandwidth: a plain copy as large as the objects of one class.
    const std::uint64_t copy_bytes = std::max<std::uint64_t>(std::uint64_t{64} << 20, objects * 32);
    const double device_copy_gbs = measure_copy_bandwidth(backend, copy_bytes);
    nlohmann::json header;
    header["mode"] = mode;
    header["backend"] = backend_name;
    header["device_copy_gbs"] = device_copy_gbs;
    header["device_copy_bytes"] = copy_bytes;
    std::cout << header.dump() << std::endl;

    std::vector<double> percents;
    if (figure9) {
      for (int percent = 0; percent <= 100; percent += 5) percents.push_back(percent);
    } else {
      percents.push_back(delete_percent);
    }
    for (const double percent : percents)
      for (const int factor : factors)
        for (const soaheap::RewriteStrategy strategy : strategies) {
          if (figure9 && strategy != strategies.front()) continue;  // the fragmentation does not depend on it
          std::vector<nlohmann::json> lines;
          for (const soaheap::CompactionStrategy compaction : compactions) {
            nlohmann::json line = run_once(
                RunSettings{backend, objects, percent, factor, strategy, compaction, target,
                            order == "none" ? locality_window : 0, seed, validate, order},
                device_copy_gbs);
            line["mode"] = mode;
            std::cout << line.dump() << std::endl;
            lines.push_back(line);
          }
          if (lines.size() == 2) std::cout << comparison(lines[0], lines[1]).dump() << std::endl;
        }
  } catch (const std::exception& error) {
    std::cerr << "defrag_bench: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
