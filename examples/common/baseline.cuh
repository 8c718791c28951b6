#pragma once
/// @file baseline.cuh
/// @brief What every baseline shares on the CUDA side: its kernel launcher. (Its result line is
///        the harness's finish_baseline, examples/harness/harness.hpp.)

#include "examples/common/cli.cuh"
#include "examples/harness/harness.hpp"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace soaheap_app {

/// @brief The kernel launcher of a baseline on @p backend, with the host thread pool it needs
///        (kept in @p pool, which must outlive it).
/// @throw soaheap::usage_error naming @p app for the cuda backend without a GPU
inline soaheap::detail::Executor baseline_executor(soaheap::Backend backend, const std::string& app,
                                                   std::unique_ptr<soaheap::detail::ThreadPool>& pool) {
  soaheap::detail::Executor executor;
  executor.backend = backend;
  if (backend == soaheap::Backend::host) {
    pool = std::make_unique<soaheap::detail::ThreadPool>(0);
    executor.pool = pool.get();
  } else if (!soaheap::cuda_available()) {
    throw soaheap::usage_error(app + ": the cuda backend needs a CUDA GPU, and none is available");
  }
  return executor;
}

/// @brief The run every baseline with a simulation class shares: times setup and iterations,
///        reports, checks against the sequential reference and prints the result line.
/// @tparam Simulation `Simulation(executor, model)` (the setup, timed), `step(iteration)`,
///         `memory_bytes()`
/// @param side_model when set, @p model is too large for the reference: the check runs on this
///        smaller model with the same rules and seed instead
/// @param check `check(model, simulation)`: the number of mismatches against the reference
/// @param report `report(simulation, result)`: fills `result.objects` and `result.extra`
/// @param mismatch_key the result line's key for the number of mismatches
/// @return the process exit code: 0 iff the self-check passed
template <class Simulation, class Model, class Check, class Report>
int run_baseline(const std::string& app, const AppOptions& options, const Model& model,
                 const std::optional<Model>& side_model, Check&& check, Report&& report,
                 const char* mismatch_key = "self_check_mismatches") {
  BaselineResult result;
  result.app = app;
  result.start = std::chrono::steady_clock::now();
  std::unique_ptr<soaheap::detail::ThreadPool> pool;
  const soaheap::detail::Executor executor = baseline_executor(options.backend, app, pool);
  const auto simulate = [&](Simulation& simulation) {
    for (int it = 0; it < options.iterations; ++it) simulation.step(static_cast<std::uint64_t>(it));
  };
  Simulation simulation(executor, model);
  const auto loop_start = std::chrono::steady_clock::now();
  simulate(simulation);
  executor.synchronize();  // kernels run asynchronously; the timed part ends when they are done
  const auto loop_end = std::chrono::steady_clock::now();
  result.simulation_seconds = std::chrono::duration<double>(loop_end - loop_start).count();
  result.timed_seconds = std::chrono::duration<double>(loop_end - result.start).count();
  result.memory_bytes = simulation.memory_bytes();
  report(simulation, result);
  std::uint64_t mismatches = 0;
  if (!side_model) {
    mismatches = check(model, simulation);
  } else {
    Simulation side(executor, *side_model);
    simulate(side);
    mismatches = check(*side_model, side);
  }
  result.self_check_passed = mismatches == 0;
  result.extra[mismatch_key] = mismatches;
  return finish_baseline(result, options);
}

}  // namespace soaheap_app
