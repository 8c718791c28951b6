#pragma once
// The rules of the life-like generational cellular automata (Bx/Sy/C on a torus) shared by
// examples/applications/game_of_life and examples/generation (objects on a soaheap heap) and their hand-written
// baselines (dense per-cell arrays): rule masks, the counter-based initial state, the neighbourhood,
// the rules the two applications run, and the sequential host reference both kinds of program are
// checked against.

#include "examples/common/counter_hash.cuh"

#include <soaheap/base/portability.cuh>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace automaton {

/// Birth and survival sets as bit masks over the alive-neighbour count (0..8) and the state count.
struct Rule {
  std::uint32_t born_mask;
  std::uint32_t survive_mask;
  std::uint32_t states;  ///< C: 1 = alive, 2..C-1 = dying, then dead
};

using soaheap_app::splitmix_hash3;

/// The initial state: a cell is alive with probability density_per_mille / 1000 (pure function of seed).
SOAHEAP_HD inline bool initially_alive(std::uint64_t seed, std::uint64_t cell, std::uint32_t density_per_mille) {
  return splitmix_hash3(seed, 1, cell) % 1000 < density_per_mille;
}

struct Grid {
  std::uint32_t width, height;
  SOAHEAP_HD std::uint32_t neighbour(std::uint32_t index, int k) const {
    // k in 0..7: the eight surrounding cells in row-major order
    const int dx = k < 3 ? k - 1 : (k < 5 ? (k == 3 ? -1 : 1) : k - 6);
    const int dy = k < 3 ? -1 : (k < 5 ? 0 : 1);
    const std::uint32_t x = index % width, y = index / width;
    const std::uint32_t nx = (x + width + static_cast<std::uint32_t>(dx + 1) - 1) % width;
    const std::uint32_t ny = (y + height + static_cast<std::uint32_t>(dy + 1) - 1) % height;
    return ny * width + nx;
  }
};
constexpr int kNeighbours = 8;

/// The state of a cell after one step: 0 dead, 1 alive, 2..C-1 dying.
SOAHEAP_HD inline std::uint8_t next_state(std::uint32_t state, std::uint32_t alive_neighbours, Rule rule) {
  if (state == 0) return ((rule.born_mask >> alive_neighbours) & 1u) != 0 ? 1 : 0;
  if (state == 1 && ((rule.survive_mask >> alive_neighbours) & 1u) != 0) return 1;
  return state + 1 < rule.states ? static_cast<std::uint8_t>(state + 1) : 0;
}

/// Conway's Game of Life, B3/S23 with no dying states (game_of_life).
constexpr Rule kConway{1u << 3, (1u << 2) | (1u << 3), 2};
/// survive on 0,2,3,5,6,7,8 alive neighbours; born on 3,4,6,8; 255 states (1 alive, 2..254 dying):
/// the "Burst"-like rule of the CompactGpu paper's generation benchmark.
constexpr Rule kBurst{(1u << 3) | (1u << 4) | (1u << 6) | (1u << 8),
                      (1u << 0) | (1u << 2) | (1u << 3) | (1u << 5) | (1u << 6) | (1u << 7) | (1u << 8), 255};

/// Largest grid side compared against the sequential reference on the full run; larger runs also
/// run and check a side-run of this size with the same seed and iterations.
constexpr std::uint32_t kReferenceMaxSide = 256;

/// The same automaton on a dense array of states, one cell after another.
class Reference {
 public:
  Reference(Grid shape, Rule rule, std::uint64_t seed, std::uint32_t density)
      : shape_(shape), rule_(rule), states_(std::size_t{shape.width} * shape.height, 0) {
    for (std::size_t i = 0; i < states_.size(); ++i) states_[i] = initially_alive(seed, i, density) ? 1 : 0;
  }
  void step() {
    std::vector<std::uint8_t> next(states_.size());
    for (std::uint32_t i = 0; i < states_.size(); ++i) {
      int alive = 0;
      for (int k = 0; k < kNeighbours; ++k) alive += states_[shape_.neighbour(i, k)] == 1 ? 1 : 0;
      next[i] = next_state(states_[i], static_cast<std::uint32_t>(alive), rule_);
    }
    states_.swap(next);
  }
  const std::vector<std::uint8_t>& states() const { return states_; }

 private:
  Grid shape_;
  Rule rule_;
  std::vector<std::uint8_t> states_;
};

/// Compares a dense grid of states with the reference cell by cell (the self-check of the
/// baselines, which have no objects); reports the first few differences on stderr.
/// @return the number of cells that differ
inline std::uint64_t count_state_mismatches(const std::vector<std::uint8_t>& states, const Reference& reference,
                                            const char* app) {
  std::uint64_t mismatches = 0;
  for (std::size_t i = 0; i < states.size(); ++i) {
    if (states[i] == reference.states()[i]) continue;
    if (mismatches < 5)
      std::fprintf(stderr, "%s self-check: cell %zu: reference state %u, got %u\n", app, i, reference.states()[i],
                   states[i]);
    ++mismatches;
  }
  if (states.size() != reference.states().size()) ++mismatches;
  return mismatches;
}

}  // namespace automaton
