// parallel_do overhead: what a parallel_do costs beyond the method's own work.
//   empty:  parallel_do over a class with no objects (the floor: enumeration + an empty method kernel)
//   empty_kernel: one launch of an empty kernel by the same executor (what any operation costs at least)
//   axpy:   y += a·x over N objects with parallel_do, against the same loop over plain arrays
//           launched by the same executor (what a hand-written SOA kernel does)
//   axpy_half_destroyed: the same after half of the objects, chosen at random, were destroyed
//           (the blocks stay half full: every block is still read), against the plain loop over N
//   small_*: parallel_do over a class of --small-objects objects (a short step of an agent program)
//           back to back (small_class), waiting after each call as DynaSOAr's parallel_do and the
//           compatibility shim do (small_class_waited), and both on a heap that times its
//           enumerations (HeapOptions::time_enumeration, on in the shim: *_timed);
//           empty_kernel_waited is the floor of a waited operation (one empty launch, then a wait)
// Each case runs --repetitions times back to back and waits once at the end, as an application's
// iteration loop does (the *_waited cases also after every call); one JSON line per case.

#include "examples/common/cli.cuh"

#include <soaheap/soaheap.cuh>

#include <soaheap/core/memory.cuh>

#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <utility>

namespace pdo {

class Particle : public soaheap::Object<Particle> {
 public:
  using FieldTypes = soaheap::fields<float, float>;
  static constexpr const char* kName = "Particle";
  soaheap::Field<Particle, 0> x;
  soaheap::Field<Particle, 1> y;
  SOAHEAP_HD Particle(std::uint64_t index) {
    x = static_cast<float>(index % 1000);
    y = 0.0f;
  }
  SOAHEAP_HD void axpy(float a) { y += a * x; }
  /// Destroys this object with probability 1/2 (a hash of its address and @p seed).
  template <class View>
  SOAHEAP_HD void maybe_destroy(const View& heap, std::uint32_t seed) {
    if (soaheap::detail::mix_seed(reinterpret_cast<std::uintptr_t>(this) ^ seed) & 1u) soaheap::destroy(heap, this);
  }
};

class Unused : public soaheap::Object<Unused> {
 public:
  using FieldTypes = soaheap::fields<soaheap::array<float, 2>>;  // as large as a Particle: same block size
  static constexpr const char* kName = "Unused";
  soaheap::Field<Unused, 0> values;
  SOAHEAP_HD void touch() { values[0] += 1.0f; }
};

using BenchHeap = soaheap::Heap<Particle, Unused>;

struct Nothing {
  SOAHEAP_HD void operator()(std::uint64_t) const {}
};

struct ArrayAxpy {
  const float* x;
  float* y;
  float a;
  SOAHEAP_HD void operator()(std::uint64_t i) const { y[i] += a * x[i]; }
};

template <class Body>
double seconds_per_call(int repetitions, Body&& body, const std::function<void()>& wait) {
  body();  // warm-up (first launch of each kernel, lazy buffers)
  wait();
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repetitions; ++r) body();
  wait();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repetitions;
}

}  // namespace pdo

int main(int argc, char** argv) {
  return soaheap_app::run_main("parallel_do_bench", [&] {
    soaheap_app::Cli cli("parallel_do overhead against plain array kernels");
    std::string backend_name;
    unsigned long long objects = 1 << 24;
    unsigned long long small_objects = 1 << 16;
    int repetitions = 1000;
    cli.backend(backend_name, soaheap::cuda_available());
    cli.option("--objects", objects, "objects of the axpy case", 1, 1ULL << 40);
    cli.option("--small-objects", small_objects, "objects of the small_* cases", 1, 1ULL << 32);
    cli.option("--repetitions", repetitions, "calls per case", 1, 1 << 30);
    if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
    const soaheap::Backend backend = soaheap::parse_backend(backend_name);

    soaheap::HeapOptions options;
    options.objects = objects + objects / 8;
    options.backend = backend;
    pdo::BenchHeap heap(options);
    heap.parallel_new<pdo::Particle>(objects);
    const std::function<void()> wait = [&] { heap.synchronize(); };
    const std::function<void()> no_wait = [] {};

    const double empty = pdo::seconds_per_call(repetitions, [&] { heap.parallel_do<pdo::Unused, &pdo::Unused::touch>(); }, wait);
    const double with_objects =
        pdo::seconds_per_call(repetitions, [&] { heap.parallel_do<pdo::Particle, &pdo::Particle::axpy>(0.5f); }, wait);

    const soaheap::detail::Executor& executor = heap.executor();
    const double empty_kernel = pdo::seconds_per_call(repetitions, [&] { executor.launch(1, pdo::Nothing{}); },
                                                      [&] { executor.synchronize(); });
    soaheap::detail::Memory x(backend, objects * sizeof(float)), y(backend, objects * sizeof(float));
    x.fill_zero();
    y.fill_zero();
    const double arrays = pdo::seconds_per_call(
        repetitions, [&] { executor.launch(objects, pdo::ArrayAxpy{x.as<float>(), y.as<float>(), 0.5f}); },
        [&] { executor.synchronize(); });

    const auto line = [&](const char* name, double seconds, std::uint64_t count) {
      soaheap_app::Result result;
      result["bench"] = "parallel_do";
      result["case"] = name;
      result["backend"] = backend_name;
      result["objects"] = count;
      result["repetitions"] = repetitions;
      result["us_per_call"] = seconds * 1e6;
      if (count != 0) result["ns_per_object"] = seconds * 1e9 / static_cast<double>(count);
      result.print();
    };
    // Short steps, as DynaSOAr programs run them: every call waited for, enumeration timed or not.
    const auto small_cases = [&](bool timed) {
      soaheap::HeapOptions small_options;
      small_options.objects = small_objects + small_objects / 8;
      small_options.backend = backend;
      small_options.time_enumeration = timed;
      pdo::BenchHeap small(small_options);
      small.parallel_new<pdo::Particle>(small_objects);
      const std::function<void()> small_wait = [&] { small.synchronize(); };
      const auto step = [&] { small.parallel_do<pdo::Particle, &pdo::Particle::axpy>(0.5f); };
      const double free_running = pdo::seconds_per_call(repetitions, step, small_wait);
      const double waited = pdo::seconds_per_call(repetitions, [&] { step(); small_wait(); }, no_wait);
      return std::make_pair(free_running, waited);
    };
    const auto [small_free, small_waited] = small_cases(false);
    const auto [small_free_timed, small_waited_timed] = small_cases(true);
    const double empty_kernel_waited = pdo::seconds_per_call(
        repetitions, [&] { executor.launch(1, pdo::Nothing{}); executor.synchronize(); }, no_wait);

    heap.parallel_do<pdo::Particle, &pdo::Particle::maybe_destroy<pdo::BenchHeap::View>>(heap.view(), 20251124u);
    const std::uint64_t survivors = heap.count<pdo::Particle>();
    const double half_destroyed =
        pdo::seconds_per_call(repetitions, [&] { heap.parallel_do<pdo::Particle, &pdo::Particle::axpy>(0.5f); }, wait);

    line("empty_class", empty, 0);
    line("empty_kernel", empty_kernel, 0);
    line("axpy_parallel_do", with_objects, objects);
    line("axpy_plain_arrays", arrays, objects);
    line("axpy_half_destroyed", half_destroyed, survivors);
    line("empty_kernel_waited", empty_kernel_waited, 0);
    line("small_class", small_free, small_objects);
    line("small_class_waited", small_waited, small_objects);
    line("small_class_timed", small_free_timed, small_objects);
    line("small_class_waited_timed", small_waited_timed, small_objects);
    soaheap_app::Result ratio;
    ratio["bench"] = "parallel_do";
    ratio["case"] = "ratio";
    ratio["axpy_parallel_do_over_arrays"] = with_objects / arrays;
    ratio["axpy_half_destroyed_over_arrays"] = half_destroyed / arrays;
    ratio.print();
    heap.validate(soaheap::Validation::structure);
    return 0;
  });
}
