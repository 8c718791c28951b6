#pragma once
// The hand-written baseline of the life-like automata (examples/applications/game_of_life, examples/generation):
// the same rules (examples/applications/game_of_life/rules.cuh) on a dense grid of per-cell states with no
// allocator. Alive, dying and candidate objects are merged into the cell -- the state byte of the
// cell says which one it is -- so one step is one kernel over all cells that reads the current
// grid (row-major, so neighbouring threads read neighbouring bytes) and writes the next one.
// Kernels run through the same executor as the heap (CUDA grid or host thread pool). Both
// baseline programs print the same JSON fields as their application and compare the final grid
// with the sequential reference cell by cell.

#include "examples/common/baseline.cuh"
#include "examples/applications/game_of_life/rules.cuh"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/core/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dense_automaton {

/// Initial states: 1 where the counter-based draw says alive, else 0.
struct Initialize {
  std::uint8_t* states;
  std::uint64_t seed;
  std::uint32_t density_per_mille;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    states[i] = automaton::initially_alive(seed, i, density_per_mille) ? 1 : 0;
  }
};

/// One generation: counts the alive (state 1) cells among the eight torus neighbours and applies
/// the rule. The row/column wrap is computed once per cell instead of once per neighbour.
struct Step {
  const std::uint8_t* current;
  std::uint8_t* next;
  automaton::Grid shape;
  automaton::Rule rule;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t i = static_cast<std::uint32_t>(index);
    const std::uint32_t width = shape.width, height = shape.height;
    const std::uint32_t x = i % width, y = i / width;
    const std::uint32_t left = x == 0 ? width - 1 : x - 1, right = x + 1 == width ? 0 : x + 1;
    const std::uint32_t above = (y == 0 ? height - 1 : y - 1) * width, row = y * width,
                        below = (y + 1 == height ? 0 : y + 1) * width;
    const std::uint32_t alive = (current[above + left] == 1) + (current[above + x] == 1) +
                                (current[above + right] == 1) + (current[row + left] == 1) +
                                (current[row + right] == 1) + (current[below + left] == 1) +
                                (current[below + x] == 1) + (current[below + right] == 1);
    next[i] = automaton::next_state(current[i], alive, rule);
  }
};

/// The automaton on two state grids in the backend's memory (current and next, swapped per step).
class Simulation {
 public:
  /// The model of a run: grid, rule, seed and initial density.
  struct Model {
    automaton::Grid shape;
    automaton::Rule rule;
    std::uint64_t seed;
    std::uint32_t density_per_mille;
  };

  Simulation(const soaheap::detail::Executor& executor, const Model& model)
      : executor_(executor),
        shape_(model.shape),
        rule_(model.rule),
        current_(executor.backend, cells()),
        next_(executor.backend, cells()) {
    executor_.launch(cells(), Initialize{current_.as<std::uint8_t>(), model.seed, model.density_per_mille});
  }

  std::uint64_t cells() const { return std::uint64_t{shape_.width} * shape_.height; }
  std::uint64_t memory_bytes() const { return current_.bytes() + next_.bytes(); }

  /// Launches one generation (asynchronously on cuda).
  void step(std::uint64_t /*iteration*/) {
    executor_.launch(cells(), Step{current_.as<std::uint8_t>(), next_.as<std::uint8_t>(), shape_, rule_});
    std::swap(current_, next_);
  }

  /// The current states (waits for the launched steps).
  std::vector<std::uint8_t> states() const {
    executor_.synchronize();
    std::vector<std::uint8_t> states(cells());
    current_.copy_to_host(states.data(), 0, cells());
    return states;
  }

 private:
  const soaheap::detail::Executor& executor_;
  automaton::Grid shape_;
  automaton::Rule rule_;
  soaheap::detail::Memory current_, next_;
};

/// What distinguishes the two baseline programs.
struct Program {
  const char* name;         ///< app name in the JSON line
  const char* description;  ///< --help text
  automaton::Rule rule;
  std::uint32_t default_density_per_mille;
  const char* alive_field;  ///< JSON field with the number of non-dead cells, as the application names it
};

/// Runs a baseline program: parses the common options, times setup and iterations, then checks
/// the result against the reference (on the full grid up to kReferenceMaxSide, else on a side-run
/// of that size, as the applications do) and prints the JSON result line.
/// @return the process exit code: 0 iff the self-check passed
inline int run(const Program& program, int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli(program.description, soaheap_app::AppDefaults{128, 4096, 100, 1000});
  std::uint32_t density = program.default_density_per_mille;
  cli.option("--density", density, "Initially alive cells per mille", 0, 1000);
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  const std::uint32_t side = static_cast<std::uint32_t>(options.size);
  const Simulation::Model model{{side, side}, program.rule, options.seed, density};
  std::optional<Simulation::Model> side_model;
  if (side > automaton::kReferenceMaxSide)
    side_model = Simulation::Model{{automaton::kReferenceMaxSide, automaton::kReferenceMaxSide}, program.rule,
                                   options.seed, density};
  return soaheap_app::run_baseline<Simulation>(
      program.name, options, model, side_model,
      [&](const Simulation::Model& checked_model, const Simulation& checked) {
        automaton::Reference reference(checked_model.shape, program.rule, options.seed, density);
        for (int it = 0; it < options.iterations; ++it) reference.step();
        return automaton::count_state_mismatches(checked.states(), reference, program.name);
      },
      [&](const Simulation& simulation, soaheap_app::BaselineResult& result) {
        std::uint64_t occupied = 0;
        for (const std::uint8_t state : simulation.states()) occupied += state != 0 ? 1 : 0;
        result.objects = {{"Cell", simulation.cells()}, {"Alive", occupied}};
        result.extra["grid"] = {side, side};
        result.extra[program.alive_field] = occupied;
      },
      "self_check_violations");
}

}  // namespace dense_automaton
