// Generation baseline: the 0235678/3468/255 rules of examples/generation on a dense grid of cell
// states, without an allocator (see ../game_of_life_baseline/dense_automaton.cuh).

#include "examples/baselines/game_of_life/dense_automaton.cuh"

int main(int argc, char** argv) {
  const dense_automaton::Program program{
      "generation_baseline",
      "Generational cellular automaton baseline: 0235678/3468/255 on a torus as a dense grid of cell states, without an "
      "allocator",
      automaton::kBurst, 100, "alive_or_dying"};
  return soaheap_app::run_main(program.name, [&] { return dense_automaton::run(program, argc, argv); });
}
