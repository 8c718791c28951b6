#pragma once
/// @file reference_check.cuh
/// @brief The run of a simulation application checked against its sequential host reference.
///
/// A run small enough for the reference is checked itself; a larger one runs unchecked and the
/// check runs on a smaller model with the same rules and seed, so that a run of any size says
/// whether the device algorithm agrees with the reference.

#include "app.cuh"
#include "model.cuh"

#include <chrono>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

namespace soaheap_app {

/// Whether @p Simulation has `static void define_orders(AppRun<Heap>&)` (its classes' orders).
template <class Simulation, class Heap, class = void>
struct defines_orders : std::false_type {};
template <class Simulation, class Heap>
struct defines_orders<Simulation, Heap, std::void_t<decltype(Simulation::define_orders(std::declval<AppRun<Heap>&>()))>>
    : std::true_type {};

/// @brief Builds the heap of @p model, runs `options.iterations` steps on it with AppRun's
///        per-iteration bookkeeping, checks the result against the reference, validates the
///        heap's structure and prints the result line.
/// @tparam Simulation `Simulation(model)`, `static heap_options(model, backend)`, `setup(heap)`,
///         `step(heap, iteration)`, optionally `static define_orders(AppRun<Heap>&)`
/// @tparam Reference `Reference(model)`, `step(iteration)`
/// @param side_model when set, @p model is too large for the reference: the main run is unchecked
///        and this smaller model is simulated and checked instead
/// @param compare `compare(reference, model, heap)`: the number of mismatches
/// @param report `report(heap, extra)`: the application's own keys of the result line
/// @return the process exit code: 0 iff the self-check passed
template <class Simulation, class Reference, class Heap, class Model, class Compare, class Report>
int run_checked_simulation(const char* app, const AppOptions& options, const Model& model,
                           const std::optional<Model>& side_model, Compare&& compare, Report&& report) {
  const auto simulate = [&](const Simulation& simulation, Heap& target, AppRun<Heap>* bookkeeping) {
    simulation.setup(target);
    for (int it = 0; it < options.iterations; ++it) {
      simulation.step(target, static_cast<std::uint64_t>(it));
      if (bookkeeping) bookkeeping->after_iteration(it);
    }
  };
  const auto compare_with_reference = [&](const Model& checked_model, const Heap& checked) {
    return compare(reference_after<Reference>(options.iterations, checked_model), checked_model, checked);
  };

  Heap heap(soaheap_app::heap_options_for(Simulation::heap_options(model, options.backend), options));
  AppRun<Heap> run(app, options, heap);
  if constexpr (defines_orders<Simulation, Heap>::value) Simulation::define_orders(run);
  simulate(Simulation(model), heap, &run);
  run.stop_clock();  // the timed part ends here; the reference check is not part of the application
  const double simulation_seconds = run.elapsed_seconds();
  std::uint64_t mismatches = 0;
  if (!side_model) {
    mismatches = compare_with_reference(model, heap);
  } else {
    Heap side_heap(Simulation::heap_options(*side_model, options.backend));
    simulate(Simulation(*side_model), side_heap, nullptr);
    mismatches = compare_with_reference(*side_model, side_heap);
  }
  heap.validate(soaheap::Validation::structure);
  Result extra;
  report(heap, extra);
  extra["simulation_time_s"] = simulation_seconds;
  extra["self_check_mismatches"] = mismatches;
  return run.finish(mismatches == 0, extra);
}

}  // namespace soaheap_app
