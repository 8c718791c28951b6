// Generational cellular automaton, rule 0235678/3468/255 ("Burst" family, the ISMM paper's
// generation benchmark): a cell that stops surviving keeps blocking its place for 253 generations
// while it dies. Only alive/dying cells and birth candidates (dead cells next to an alive cell)
// are objects: each step runs in O(alive + dying + candidates). See ../game-of-life/automaton.cuh.

#include "examples/common/app.cuh"
#include "examples/game-of-life/automaton.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>

namespace {

using GenerationHeap = soaheap::Heap<automaton::Cell, automaton::Agent, automaton::Alive, automaton::Candidate>;

int run_app(int argc, char** argv) {
  CLI::App cli{"Generational cellular automaton 0235678/3468/255 on a torus; only alive/dying cells and birth candidates are heap objects"};
  soaheap_app::CommonOptions common(cli, soaheap_app::AppDefaults{128, 4096, 100, 1000});
  std::uint32_t density = 100;
  cli.add_option("--density", density, "Initially alive cells per mille")->check(CLI::Range(0, 1000))->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  const soaheap_app::AppOptions options = common.finalize();
  const std::uint32_t side = static_cast<std::uint32_t>(options.size);

  automaton::Automaton<GenerationHeap> life{{side, side}, automaton::kBurst, options.seed, density, {}};
  GenerationHeap heap(automaton::Automaton<GenerationHeap>::heap_options(life.cells(), options.backend));
  soaheap_app::AppRun<GenerationHeap> run("generation", options, heap);
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
  const auto check = [&](const automaton::Automaton<GenerationHeap>& sim, const GenerationHeap& checked) {
    automaton::Reference reference(sim.shape, sim.rule, sim.seed, sim.density_per_mille);
    for (int it = 0; it < options.iterations; ++it) reference.step();
    return automaton::compare(checked, sim.shape, reference, "generation");
  };
  if (side <= automaton::kReferenceMaxSide) {
    violations = check(life, heap);
  } else {
    constexpr std::uint32_t small_side = automaton::kReferenceMaxSide;
    automaton::Automaton<GenerationHeap> small{{small_side, small_side}, automaton::kBurst, options.seed, density, {}};
    GenerationHeap small_heap(automaton::Automaton<GenerationHeap>::heap_options(small.cells(), options.backend));
    small.setup(small_heap);
    for (int it = 0; it < options.iterations; ++it) small.step(small_heap, static_cast<std::uint64_t>(it));
    violations = check(small, small_heap);
  }
  nlohmann::json extra;
  extra["grid"] = {side, side};
  extra["alive_or_dying"] = alive;
  extra["self_check_violations"] = violations;
  return run.finish(violations == 0, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("generation", [&] { return run_app(argc, argv); });
}
