// How full the blocks are that allocation loops leave, and how long the loops take: threads of one
// kernel allocate 16-byte objects in loops whose lengths follow a pattern, into a heap with room for
// a multiple of them. Patterns: ragged (thread t allocates (7919·t mod 61) + 1: after the first
// iteration the allocating lanes are a diverged part of their warp), uniform (31 each: whole warps),
// half-warp (odd lanes 62 each), one-lane (one lane per warp 992). Each runs with the default
// allocation and with HeapOptions::pack_allocations. One JSON line per (pattern, packing).

#include "examples/common/cli.cuh"

#include <soaheap/soaheap.cuh>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace placement {

class Cell16 : public soaheap::Object<Cell16> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t, std::uint64_t>;
  static constexpr const char* kName = "Cell16";
  soaheap::Field<Cell16, 0> owner;
  soaheap::Field<Cell16, 1> value;
  SOAHEAP_HD explicit Cell16(std::uint64_t new_owner) {
    owner = new_owner;
    value = 0;
  }
};
using PlacementHeap = soaheap::Heap<Cell16>;

enum class Pattern { ragged, uniform, half_warp, one_lane };
const char* name_of(Pattern pattern) {
  switch (pattern) {
    case Pattern::ragged: return "ragged";
    case Pattern::uniform: return "uniform";
    case Pattern::half_warp: return "half-warp";
    case Pattern::one_lane: return "one-lane";
  }
  return "?";
}

SOAHEAP_HD inline std::uint64_t objects_of(Pattern pattern, std::uint64_t tid) {
  switch (pattern) {
    case Pattern::ragged: return (tid * 7919) % 61 + 1;
    case Pattern::uniform: return 31;
    case Pattern::half_warp: return tid % 2 == 1 ? 62 : 0;
    case Pattern::one_lane: return tid % 32 == 0 ? 31 * 32 : 0;
  }
  return 0;
}

struct AllocateLoop {
  PlacementHeap::View heap;
  Pattern pattern;
  std::uint64_t* failures;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const std::uint64_t count = objects_of(pattern, tid);
    for (std::uint64_t i = 0; i < count; ++i)
      if (new (heap) Cell16(tid) == nullptr) soaheap::detail::atomic_fetch_add(failures, 1);
  }
};

int run(int argc, char** argv) {
  soaheap_app::Cli cli("placement benchmark: block fill and time of allocation loops, default and packed (JSON lines)");
  unsigned long long threads = 32768;
  unsigned long long room = 8;
  std::string backend_name;
  cli.option("--threads", threads, "Allocating threads", 32, 1ULL << 30);
  cli.option("--room", room, "Heap room as a multiple of the objects allocated", 2, 1024);
  cli.backend(backend_name, soaheap::cuda_available());
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap::Backend backend = soaheap::parse_backend(backend_name);

  bool all_succeeded = true;
  for (const Pattern pattern : {Pattern::ragged, Pattern::uniform, Pattern::half_warp, Pattern::one_lane}) {
    std::uint64_t objects = 0;
    for (std::uint64_t t = 0; t < threads; ++t) objects += objects_of(pattern, t);
    for (const bool packed : {false, true}) {
      soaheap::HeapOptions options;
      options.objects = objects * room;
      options.backend = backend;
      options.pack_allocations = packed;
      PlacementHeap heap(options);
      soaheap::detail::Memory failures(backend, sizeof(std::uint64_t));
      failures.fill_zero();
      const auto start = std::chrono::steady_clock::now();
      heap.executor().run(threads, AllocateLoop{heap.view(), pattern, failures.as<std::uint64_t>()});  // synchronizes
      const double kernel_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      heap.throw_recorded_error();
      std::uint64_t failed = 0;
      failures.copy_to_host(&failed, 0, sizeof(failed));
      const soaheap::ClassStats cells = heap.stats().of("Cell16");  // a copy: stats() is a temporary
      const auto capacity = static_cast<std::uint64_t>(cells.capacity);
      const bool ok = failed == 0 && cells.used_slots == objects;
      all_succeeded = all_succeeded && ok;
      std::cout << nlohmann::json{{"app", "placement_bench"},
                                  {"backend", std::string(soaheap::to_string(backend))},
                                  {"pattern", name_of(pattern)},
                                  {"packed", packed},
                                  {"threads", threads},
                                  {"objects", objects},
                                  {"heap_blocks", heap.block_count()},
                                  {"blocks", cells.allocated_blocks},
                                  {"fewest_blocks", (objects + capacity - 1) / capacity},
                                  {"fill", cells.allocated_blocks == 0 ? 0.0 : static_cast<double>(cells.used_slots) /
                                                                                  static_cast<double>(cells.allocated_blocks * capacity)},
                                  {"kernel_ms", kernel_ms},
                                  {"failed_allocations", failed},
                                  {"self_check", ok ? "passed" : "failed"}}
                       .dump()
                << std::endl;
    }
  }
  return all_succeeded ? 0 : 1;
}

}  // namespace placement

int main(int argc, char** argv) {
  return soaheap_app::run_main("placement_bench", [&] { return placement::run(argc, argv); });
}
