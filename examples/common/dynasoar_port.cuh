#pragma once
/// @file dynasoar_port.cuh
/// @brief What the programs of examples/dynasoar_* (DynaSOAr's example programs written with the
///        native API) share: the heap size of DynaSOAr's programs, so that both sides of the
///        comparison with the shim (tools/gpu/dynasoar-examples.sh compare) enumerate equal heaps.

#include "examples/harness/harness.hpp"

#include <chrono>
#include <cstdint>

namespace soaheap_app {

/// Most of DynaSOAr's example programs declare `kNumObjects = 64*64*64*64` (their
/// configuration.h; traffic half of it); the shim makes a heap of that many objects.
constexpr std::uint64_t kDynasoarObjects = 64ull * 64 * 64 * 64;

/// `--heap-objects N`: the heap's room in objects of its smallest class; @p objects holds the
/// default, the program's kNumObjects.
inline void add_heap_objects_option(Cli& cli, std::uint64_t& objects) {
  cli.option("--heap-objects", objects,
             "heap size in objects of the smallest class (default: the kNumObjects of DynaSOAr's program, as the shim uses)");
}

/// The clock of DynaSOAr's programs: it starts once setup has finished on the GPU and stops after
/// the last iteration's kernels (their printed time leaves setup out).
template <class Heap>
class IterationClock {
 public:
  explicit IterationClock(const Heap& heap) : heap_(heap) {
    heap_.synchronize();
    start_ = std::chrono::steady_clock::now();
  }
  /// Seconds since the start, the GPU's work included.
  double seconds() const {
    heap_.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  const Heap& heap_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace soaheap_app
