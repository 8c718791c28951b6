// Game of Life baseline: the B3/S23 rules of examples/applications/game_of_life on a dense grid of cell states,
// without an allocator (see dense_automaton.cuh).

#include "examples/baselines/game_of_life/dense_automaton.cuh"

int main(int argc, char** argv) {
  const dense_automaton::Program program{
      "game_of_life_baseline", "Game of Life baseline: B3/S23 on a torus as a dense grid of cell states, without an allocator",
      automaton::kConway, 200, "alive"};
  return soaheap_app::run_main(program.name, [&] { return dense_automaton::run(program, argc, argv); });
}
