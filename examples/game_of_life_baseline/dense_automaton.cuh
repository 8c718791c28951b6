#pragma once
// The hand-written baseline of the life-like automata (examples/game-of-life, examples/generation):
// the same rules (examples/game-of-life/rules.cuh) on a dense grid of per-cell states with no
// allocator. Alive, dying and candidate objects are merged into the cell -- the state byte of the
// cell says which one it is -- so one step is one kernel over all cells that reads the current
// grid (row-major, so neighbouring threads read neighbouring bytes) and writes the next one.
// Kernels run through the same executor as the heap (CUDA grid or host thread pool). Both
// baseline programs print the same JSON fields as their application and compare the final grid
// with the sequential reference cell by cell.

#include "examples/common/app.cuh"
#include "examples/game-of-life/rules.cuh"

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
  Simulation(const soaheap::detail::Executor& executor, automaton::Grid shape, automaton::Rule rule,
             std::uint64_t seed, std::uint32_t density_per_mille)
      : executor_(executor),
        shape_(shape),
        rule_(rule),
        current_(executor.backend, cells()),
        next_(executor.backend, cells()) {
    executor_.launch(cells(), Initialize{current_.as<std::uint8_t>(), seed, density_per_mille});
  }

  std::uint64_t cells() const { return std::uint64_t{shape_.width} * shape_.height; }
  std::uint64_t memory_bytes() const { return current_.bytes() + next_.bytes(); }

  /// Launches one generation (asynchronously on cuda).
  void step() {
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
  CLI::App cli{program.description};
  soaheap_app::CommonOptions common(cli, soaheap_app::AppDefaults{128, 4096, 100, 1000});
  std::uint32_t density = program.default_density_per_mille;
  cli.add_option("--density", density, "Initially alive cells per mille")->check(CLI::Range(0, 1000))->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  const soaheap_app::AppOptions options = common.finalize();
  const auto start = std::chrono::steady_clock::now();
  const std::uint32_t side = static_cast<std::uint32_t>(options.size);

  std::unique_ptr<soaheap::detail::ThreadPool> pool;
  soaheap::detail::Executor executor;
  executor.backend = options.backend;
  if (options.backend == soaheap::Backend::host) {
    pool = std::make_unique<soaheap::detail::ThreadPool>(0);
    executor.pool = pool.get();
  } else if (!soaheap::cuda_available()) {
    throw soaheap::usage_error(std::string(program.name) + ": the cuda backend needs a CUDA GPU, and none is available");
  }
  Simulation life(executor, {side, side}, program.rule, options.seed, density);
  const auto loop_start = std::chrono::steady_clock::now();
  for (int it = 0; it < options.iterations; ++it) life.step();
  executor.synchronize();  // kernels run asynchronously; the timed part ends when they are done
  const auto loop_end = std::chrono::steady_clock::now();
  const double loop_seconds = std::chrono::duration<double>(loop_end - loop_start).count();
  const double timed_seconds = std::chrono::duration<double>(loop_end - start).count();

  const std::vector<std::uint8_t> states = life.states();
  std::uint64_t occupied = 0;
  for (const std::uint8_t state : states) occupied += state != 0 ? 1 : 0;
  const auto check = [&](automaton::Grid shape, const std::vector<std::uint8_t>& result) {
    automaton::Reference reference(shape, program.rule, options.seed, density);
    for (int it = 0; it < options.iterations; ++it) reference.step();
    return automaton::count_state_mismatches(result, reference, program.name);
  };
  std::uint64_t mismatches = 0;
  if (side <= automaton::kReferenceMaxSide) {
    mismatches = check({side, side}, states);
  } else {
    const automaton::Grid small_shape{automaton::kReferenceMaxSide, automaton::kReferenceMaxSide};
    Simulation small(executor, small_shape, program.rule, options.seed, density);
    for (int it = 0; it < options.iterations; ++it) small.step();
    mismatches = check(small_shape, small.states());
  }
  const bool passed = mismatches == 0;
  const double check_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - timed_seconds;
  nlohmann::json line = {{"app", program.name},
                         {"backend", std::string(soaheap::to_string(options.backend))},
                         {"size", options.size},
                         {"iterations", options.iterations},
                         {"seed", options.seed},
                         {"defrag_policy", "none"},
                         {"defrag_factor", 0},
                         {"total_time_s", timed_seconds},
                         {"check_time_s", check_seconds},
                         {"simulation_time_s", loop_seconds},
                         {"defrag_time_s", 0.0},
                         {"enumeration_time_s", 0.0},
                         {"objects", {{"Cell", life.cells()}, {"Alive", occupied}}},
                         {"peak_allocated_blocks", 0},
                         {"allocated_blocks", 0},
                         {"block_bytes", 0},
                         {"heap_bytes", life.memory_bytes()},
                         {"fragmentation", 0.0},
                         {"defrag_runs", 0},
                         {"blocks_freed", 0},
                         {"objects_moved", 0},
                         {"grid", {side, side}},
                         {program.alive_field, occupied},
                         {"self_check_violations", mismatches},
                         {"self_check", passed ? "passed" : "failed"}};
  std::cout << line.dump() << std::endl;
  return passed ? 0 : 1;
}

}  // namespace dense_automaton
