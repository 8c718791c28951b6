// Generational cellular automaton, rule 0235678/3468/255 ("Burst" family, the ISMM paper's
// generation benchmark): a cell that stops surviving keeps blocking its place for 253 generations
// while it dies. Only alive/dying cells and birth candidates (dead cells next to an alive cell)
// are objects: each step runs in O(alive + dying + candidates). See ../game-of-life/automaton.cuh.

#include "examples/common/app.cuh"
#include "examples/game-of-life/automaton_app.cuh"

int main(int argc, char** argv) {
  // survive on 0,2,3,5,6,7,8 alive neighbours; born on 3,4,6,8; 255 states (1 alive, 2..254 dying)
  static constexpr automaton::AutomatonApp kBurst{
      "generation",
      "Generational cellular automaton 0235678/3468/255 on a torus; only alive/dying cells and birth candidates "
      "are heap objects",
      automaton::Rule{(1u << 3) | (1u << 4) | (1u << 6) | (1u << 8),
                      (1u << 0) | (1u << 2) | (1u << 3) | (1u << 5) | (1u << 6) | (1u << 7) | (1u << 8), 255},
      100, "alive_or_dying"};
  return soaheap_app::run_main(kBurst.name, [&] { return automaton::run_automaton_app(kBurst, argc, argv); });
}
