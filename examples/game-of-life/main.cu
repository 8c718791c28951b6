// Game of Life (B3/S23) where only alive cells and candidates (dead cells next to an alive cell)
// are objects: each step runs in O(alive + candidates). See automaton.cuh for the model.

#include "examples/common/app.cuh"
#include "examples/game-of-life/automaton.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>

namespace {

using LifeHeap = soaheap::Heap<automaton::Cell, automaton::Agent, automaton::Alive, automaton::Candidate>;

int run_app(int argc, char** argv) {
  CLI::App cli{"Game of Life (B3/S23) on a torus; only alive cells and birth candidates are heap objects"};
  soaheap_app::CommonOptions common(cli, soaheap_app::AppDefaults{128, 4096, 100, 1000});
  std::uint32_t density = 200;
  cli.add_option("--density", density, "Initially alive cells per mille")->check(CLI::Range(0, 1000))->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  const soaheap_app::AppOptions options = common.finalize();
  const std::uint32_t side = static_cast<std::uint32_t>(options.size);

  automaton::Automaton<LifeHeap> life{{side, side}, automaton::kConway, options.seed, density, {}};
  LifeHeap heap(automaton::Automaton<LifeHeap>::heap_options(life.cells(), options.backend));
  soaheap_app::AppRun<LifeHeap> run("game-of-life", options, heap);
  life.setup(heap);
  for (int it = 0; it < options.iterations; ++it) {
    life.step(heap, static_cast<std::uint64_t>(it));
    const long long defrag_runs = run.defrag_runs();
    run.after_iteration(it);
    if (run.defrag_runs() != defrag_runs) life.reregister(heap);
  }
  run.stop_clock();
  heap.validate();  // throws (exit code 2) when a heap invariant or a pointer field is broken
  const std::uint64_t alive = heap.count<automaton::Alive>();

  std::uint64_t violations = 0;
  const auto check = [&](const automaton::Automaton<LifeHeap>& sim, const LifeHeap& checked) {
    automaton::Reference reference(sim.shape, sim.rule, sim.seed, sim.density_per_mille);
    for (int it = 0; it < options.iterations; ++it) reference.step();
    return automaton::compare(checked, sim.shape, reference, "game-of-life");
  };
  if (side <= automaton::kReferenceMaxSide) {
    violations = check(life, heap);
  } else {
    constexpr std::uint32_t small_side = automaton::kReferenceMaxSide;
    automaton::Automaton<LifeHeap> small{{small_side, small_side}, automaton::kConway, options.seed, density, {}};
    LifeHeap small_heap(automaton::Automaton<LifeHeap>::heap_options(small.cells(), options.backend));
    small.setup(small_heap);
    for (int it = 0; it < options.iterations; ++it) small.step(small_heap, static_cast<std::uint64_t>(it));
    violations = check(small, small_heap);
  }
  nlohmann::json extra;
  extra["grid"] = {side, side};
  extra["alive"] = alive;
  extra["self_check_violations"] = violations;
  return run.finish(violations == 0, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("game-of-life", [&] { return run_app(argc, argv); });
}
