// Game of Life (B3/S23) where only alive cells and candidates (dead cells next to an alive cell)
// are objects: each step runs in O(alive + candidates). See automaton.cuh for the model.

#include "examples/common/app.cuh"
#include "examples/applications/game_of_life/automaton_app.cuh"

int main(int argc, char** argv) {
  static constexpr automaton::AutomatonApp kGameOfLife{
      "game_of_life", "Game of Life (B3/S23) on a torus; only alive cells and birth candidates are heap objects",
      automaton::kConway, 200, "alive"};
  return soaheap_app::run_main(kGameOfLife.name, [&] { return automaton::run_automaton_app(kGameOfLife, argc, argv); });
}
