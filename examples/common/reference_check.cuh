#pragma once
/// @file reference_check.cuh
/// @brief The self-check of a simulation application against its sequential host reference.
///
/// A run small enough for the reference is checked itself; a larger one runs unchecked and the
/// check runs on a smaller model with the same rules and seed, so that a run of any size says
/// whether the device algorithm agrees with the reference.

#include "app.cuh"

#include <chrono>
#include <cstdint>
#include <optional>

namespace soaheap_app {

/// @brief What run_with_reference_check() found.
struct ReferenceCheck {
  std::uint64_t mismatches = 0;   ///< differences between the heap and the reference (0 = passed)
  double simulation_seconds = 0;  ///< seconds from AppRun's start to the end of the main run
};

/// @brief Runs `options.iterations` steps of the model @p model on @p heap (with @p run's
///        per-iteration bookkeeping) and checks the result against the reference.
/// @tparam Simulation `Simulation(model)`, `static heap_options(model, backend)`, `setup(heap)`,
///         `step(heap, iteration)`
/// @tparam Reference `Reference(model)`, `step(iteration)`
/// @param compare `compare(reference, model, heap)`: the number of mismatches
/// @param side_model when set, @p model is too large for the reference: the main run is unchecked
///        and this smaller model is simulated and checked instead
template <class Simulation, class Reference, class Heap, class Model, class Compare>
ReferenceCheck run_with_reference_check(const AppOptions& options, AppRun<Heap>& run, Heap& heap, const Model& model,
                                        const std::optional<Model>& side_model, Compare&& compare) {
  const auto simulate = [&](const Simulation& simulation, Heap& target, AppRun<Heap>* bookkeeping) {
    simulation.setup(target);
    for (int it = 0; it < options.iterations; ++it) {
      simulation.step(target, static_cast<std::uint64_t>(it));
      if (bookkeeping) bookkeeping->after_iteration(it);
    }
  };
  const auto compare_with_reference = [&](const Model& checked_model, const Heap& checked) {
    Reference reference(checked_model);
    for (int it = 0; it < options.iterations; ++it) reference.step(static_cast<std::uint64_t>(it));
    return compare(reference, checked_model, checked);
  };

  ReferenceCheck check;
  simulate(Simulation(model), heap, &run);
  run.stop_clock();  // the timed part ends here; the reference check is not part of the application
  check.simulation_seconds = run.elapsed_seconds();
  if (!side_model) {
    check.mismatches = compare_with_reference(model, heap);
  } else {
    Heap side_heap(Simulation::heap_options(*side_model, options.backend));
    simulate(Simulation(*side_model), side_heap, nullptr);
    check.mismatches = compare_with_reference(*side_model, side_heap);
  }
  return check;
}

}  // namespace soaheap_app
