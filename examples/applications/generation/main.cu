// Generational cellular automaton, rule 0235678/3468/255 ("Burst" family, the ISMM paper's
// generation benchmark): a cell that stops surviving keeps blocking its place for 253 generations
// while it dies. Only alive/dying cells and birth candidates (dead cells next to an alive cell)
// are objects: each step runs in O(alive + dying + candidates). See ../game_of_life/automaton.cuh.

#include "examples/common/app.cuh"
// The update methods' rare allocations capped to 40 registers: 0.84x the time, 0.96x since the
// counts are added by alive cells (automaton.cuh).
#define AUTOMATON_MIN_BLOCKS_PER_MULTIPROCESSOR 6
#include "examples/applications/game_of_life/automaton_app.cuh"

int main(int argc, char** argv) {
  static constexpr automaton::AutomatonApp kGeneration{
      "generation",
      "Generational cellular automaton 0235678/3468/255 on a torus; only alive/dying cells and birth candidates "
      "are heap objects",
      automaton::kBurst, 100, "alive_or_dying"};
  return soaheap_app::run_main(kGeneration.name, [&] { return automaton::run_automaton_app(kGeneration, argc, argv); });
}
