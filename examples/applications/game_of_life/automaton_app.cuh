#pragma once
/// @file automaton_app.cuh
/// @brief The whole program of a cellular-automaton application (game_of_life, generation): the
///        two differ only in their rule, name and initial density, so both are this driver with
///        their own AutomatonApp.
///
/// It parses the common options and --density, runs the automaton with the defragmentation policy,
/// validates the heap, and checks the result against the sequential reference (on a side run of at
/// most kReferenceMaxSide (rules.cuh) cells per side when the grid is larger).

#include "examples/common/app.cuh"
#include "examples/applications/game_of_life/automaton.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>

namespace automaton {

/// @brief What makes one automaton application.
struct AutomatonApp {
  const char* name;               ///< program name (app key, log and error prefix)
  const char* description;        ///< CLI help headline
  Rule rule;
  std::uint32_t default_density;  ///< initially alive cells per mille
  const char* population_key;     ///< result key of the live-object count ("alive", "alive_or_dying")
};

using AutomatonHeap = soaheap::Heap<Cell, Agent, Alive, Candidate>;

/// The grid index of an agent's cell (the order the policies compact agents in).
struct GridPosition {
  SOAHEAP_HD std::uint32_t operator()(const Agent* agent) const { return agent->position; }
};

/// @brief Runs @p app from the command line; returns the process exit code.
inline int run_automaton_app(const AutomatonApp& app, int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli(app.description, soaheap_app::AppDefaults{128, 4096, 100, 1000});
  std::uint32_t density = app.default_density;
  cli.option("--density", density, "Initially alive cells per mille", 0, 1000);
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  const std::uint32_t side = static_cast<std::uint32_t>(options.size);

  Automaton<AutomatonHeap> life{{side, side}, app.rule, options.seed, density, {}};
  AutomatonHeap heap(soaheap_app::heap_options_for(Automaton<AutomatonHeap>::heap_options(life.cells(), options.backend), options));
  soaheap_app::AppRun<AutomatonHeap> run(app.name, options, heap);
  // Agents in the order of their cells' grid index: a warp's agents then read neighbouring cells.
  run.define_order<Alive>("key:position", soaheap::order_by_key<32>(GridPosition{}));
  run.define_order<Candidate>("key:position", soaheap::order_by_key<32>(GridPosition{}));
  life.setup(heap);
  for (int it = 0; it < options.iterations; ++it) {
    life.step(heap, static_cast<std::uint64_t>(it));
    const long long defrag_runs = run.defrag_runs();
    run.after_iteration(it);
    if (run.defrag_runs() != defrag_runs) life.reregister(heap);
  }
  run.stop_clock();
  heap.validate();  // throws (exit code 2) when a heap invariant or a pointer field is broken
  const std::uint64_t alive = heap.count<Alive>();

  std::uint64_t violations = 0;
  const auto check = [&](const Automaton<AutomatonHeap>& sim, const AutomatonHeap& checked) {
    Reference reference(sim.shape, sim.rule, sim.seed, sim.density_per_mille);
    for (int it = 0; it < options.iterations; ++it) reference.step();
    return compare(checked, sim.shape, reference, app.name);
  };
  if (side <= kReferenceMaxSide) {
    violations = check(life, heap);
  } else {
    Automaton<AutomatonHeap> small{{kReferenceMaxSide, kReferenceMaxSide}, app.rule, options.seed, density, {}};
    AutomatonHeap small_heap(Automaton<AutomatonHeap>::heap_options(small.cells(), options.backend));
    small.setup(small_heap);
    for (int it = 0; it < options.iterations; ++it) small.step(small_heap, static_cast<std::uint64_t>(it));
    violations = check(small, small_heap);
  }
  soaheap_app::Result extra;
  extra["grid"] = {side, side};
  extra[app.population_key] = alive;
  extra["self_check_violations"] = violations;
  return run.finish(violations == 0, extra);
}

}  // namespace automaton
