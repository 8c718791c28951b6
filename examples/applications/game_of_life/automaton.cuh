#pragma once
// A life-like generational cellular automaton (Bx/Sy/C) on a torus grid where only alive (and
// dying) cells and "candidates" -- dead cells next to an alive cell, the only dead cells that can
// be born -- are objects, so one step costs O(alive + candidates), not O(cells).
// game_of_life runs it with B3/S23/2, generation with the "Burst"-like 0235678/3468/255.
//
// Every cell of the grid is a Cell object (never freed) whose `agent` field points to its Alive or
// Candidate object, or is null. A dense array maps grid positions to Cells; it is re-registered
// after every defragmentation run, so it stays right even if Cells move.
//
// A step starts with every alive cell adding one to the count of each of its eight neighbours'
// agents (there is one: an empty cell has no alive neighbour), so only alive cells walk a
// neighbourhood; the updates read their count and clear it for the next step.
//
// State after each step (checked against the sequential reference): Alive objects carry their
// state (1 = alive, 2..C-1 = dying); every empty cell has no alive neighbour; every count is 0.

#include "examples/applications/game_of_life/rules.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>
#include <cstdio>
#include <vector>

// Resident thread blocks per multiprocessor of the Alive and Candidate method kernels
// (soaheap::Object::kMinBlocksPerMultiprocessor), chosen per program before including this file.
// Their `update`s allocate in a rare branch (a death leaves a Candidate, a birth makes an Alive):
// uncapped, those paths hold 56 registers, 4 blocks. At 6 (40 registers), generation runs 0.84x
// the time on an H200 and game_of_life 1.01x (auto) to 1.03x (no defragmentation), so only
// generation sets it (with the counts added by alive cells still 0.96x for generation;
// docs/decisions/007-min-blocks-per-multiprocessor.md).
#ifndef AUTOMATON_MIN_BLOCKS_PER_MULTIPROCESSOR
#define AUTOMATON_MIN_BLOCKS_PER_MULTIPROCESSOR 0
#endif

namespace automaton {

class Agent;

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes = soaheap::fields<Agent*, std::uint64_t, std::uint32_t>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> agent;
  soaheap::Field<Cell, 1> claim;  ///< (step+1) << 32 | (claimant + 1): which new cell creates its candidate
  soaheap::Field<Cell, 2> index;

  SOAHEAP_HD Cell(std::uint64_t new_index, Cell** grid) {
    agent = nullptr;
    claim = 0;
    index = static_cast<std::uint32_t>(new_index);
    grid[new_index] = this;
  }
  /// Re-enters this cell into the position map (after defragmentation may have moved it).
  SOAHEAP_HD void register_in(Cell** grid) { grid[static_cast<std::uint32_t>(index)] = this; }
  SOAHEAP_HD std::uint64_t* claim_address() { return &static_cast<std::uint64_t&>(claim); }
};

class Agent : public soaheap::Object<Agent> {
 public:
  using FieldTypes = soaheap::fields<std::uint32_t, std::uint32_t>;
  static constexpr const char* kName = "Agent";
  static constexpr bool kAbstract = true;
  soaheap::Field<Agent, 0> position;
  /// Alive neighbours: each adds one in the first phase of a step (Alive::tell_neighbours); the
  /// update that reads it clears it.
  soaheap::Field<Agent, 1> alive_neighbours;

  SOAHEAP_HD explicit Agent(std::uint32_t new_position) {
    position = new_position;
    alive_neighbours = 0;
  }
  SOAHEAP_HD std::uint32_t* alive_neighbours_address() { return &static_cast<std::uint32_t&>(alive_neighbours); }
  /// The count of this step, cleared for the next one.
  SOAHEAP_HD std::uint32_t take_alive_neighbours() {
    const std::uint32_t alive = alive_neighbours;
    if (alive != 0) alive_neighbours = 0;
    return alive;
  }
};

class Alive;
class Candidate;

class Alive : public soaheap::Object<Alive, Agent> {
 public:
  using FieldTypes = soaheap::fields<std::uint8_t, std::uint8_t>;
  static constexpr const char* kName = "Alive";
  static constexpr int kMinBlocksPerMultiprocessor = AUTOMATON_MIN_BLOCKS_PER_MULTIPROCESSOR;
  soaheap::Field<Alive, 0> state;  ///< 1 alive, 2.. dying
  soaheap::Field<Alive, 1> fresh;  ///< born in this step: must create candidates around it

  SOAHEAP_HD Alive(std::uint32_t new_position, bool is_fresh) : Object(new_position) {
    state = 1;
    fresh = is_fresh ? 1 : 0;
  }

  template <class View>
  SOAHEAP_HD void tell_neighbours(const View&, Cell** grid, Grid shape);
  template <class View>
  SOAHEAP_HD void update(const View& heap, Cell** grid, Rule rule);
  template <class View>
  SOAHEAP_HD void claim_candidates(const View&, Cell** grid, Grid shape, std::uint64_t step);
  template <class View>
  SOAHEAP_HD void create_candidates(const View& heap, Cell** grid, Grid shape, std::uint64_t step);
};

class Candidate : public soaheap::Object<Candidate, Agent> {
 public:
  using FieldTypes = soaheap::fields<>;
  static constexpr const char* kName = "Candidate";
  static constexpr int kMinBlocksPerMultiprocessor = AUTOMATON_MIN_BLOCKS_PER_MULTIPROCESSOR;

  SOAHEAP_HD explicit Candidate(std::uint32_t new_position) : Object(new_position) {}

  template <class View>
  SOAHEAP_HD void update(const View& heap, Cell** grid, Rule rule);
};

/// The first phase of a step: an alive cell adds one to the count of each neighbour's agent. Only
/// alive cells walk a neighbourhood, where counting by every agent had each candidate and alive
/// cell read eight cells, their eight occupants and the occupants' states (candidates outnumber
/// alive cells four to one in generation). The eight cells' loads go out together, then their
/// eight occupants', then the eight additions, which nobody waits for.
template <class View>
SOAHEAP_HD void Alive::tell_neighbours(const View&, Cell** grid, Grid shape) {
  fresh = 0;
  if (state != 1) return;
  const std::uint32_t at = position;
  Cell* cells[kNeighbours];
  SOAHEAP_UNROLL
  for (int k = 0; k < kNeighbours; ++k) cells[k] = grid[shape.neighbour(at, k)];
  Agent* occupants[kNeighbours];
  SOAHEAP_UNROLL
  for (int k = 0; k < kNeighbours; ++k) occupants[k] = cells[k]->agent;
  SOAHEAP_UNROLL
  for (int k = 0; k < kNeighbours; ++k) {
    if (occupants[k] != nullptr) soaheap::detail::atomic_add_no_return(occupants[k]->alive_neighbours_address(), 1u);
  }
}

template <class View>
SOAHEAP_HD void Alive::update(const View& heap, Cell** grid, Rule rule) {
  if (fresh != 0) return;  // born in this step by Candidate::update (its count is 0)
  const std::uint32_t alive = take_alive_neighbours();
  const std::uint32_t s = state;
  if (s == 1 && ((rule.survive_mask >> alive) & 1u) != 0) return;
  if (s + 1 < rule.states) {
    state = static_cast<std::uint8_t>(s + 1);
    return;
  }
  // Dead: the cell may have alive neighbours, so it stays around as a candidate for one step.
  const std::uint32_t at = position;
  Cell* cell = grid[at];
  soaheap::destroy(heap, this);
  cell->agent = new (heap) Candidate(at);
}

template <class View>
SOAHEAP_HD void Candidate::update(const View& heap, Cell** grid, Rule rule) {
  const std::uint32_t alive = take_alive_neighbours();
  const std::uint32_t at = position;
  if (((rule.born_mask >> alive) & 1u) != 0) {
    Cell* cell = grid[at];
    soaheap::destroy(heap, this);
    cell->agent = new (heap) Alive(at, true);
  } else if (alive == 0) {
    Cell* cell = grid[at];
    soaheap::destroy(heap, this);
    cell->agent = nullptr;
  }
}

template <class View>
SOAHEAP_HD void Alive::claim_candidates(const View&, Cell** grid, Grid shape, std::uint64_t step) {
  if (fresh == 0) return;
  const std::uint32_t at = position;
  const std::uint64_t key = ((step + 1) << 32) | (std::uint64_t{at} + 1);
  for (int k = 0; k < kNeighbours; ++k) {
    Cell* cell = grid[shape.neighbour(at, k)];
    if (static_cast<Agent*>(cell->agent) != nullptr) continue;
    // Deterministic winner: the largest claim of this step (no first-come-first-served).
    std::uint64_t* address = cell->claim_address();
    std::uint64_t current = soaheap::detail::atomic_load(address);
    while (current < key) {
      const std::uint64_t found = soaheap::detail::atomic_cas(address, current, key);
      if (found == current) break;
      current = found;
    }
  }
}

template <class View>
SOAHEAP_HD void Alive::create_candidates(const View& heap, Cell** grid, Grid shape, std::uint64_t step) {
  if (fresh == 0) return;
  const std::uint32_t at = position;
  const std::uint64_t key = ((step + 1) << 32) | (std::uint64_t{at} + 1);
  unsigned won = 0;  // the neighbours whose claim this cell won
  for (int k = 0; k < kNeighbours; ++k) {
    if (static_cast<std::uint64_t>(grid[shape.neighbour(at, k)]->claim) == key) won |= 1u << k;
  }
  // One candidate per round, not one per direction: the lanes of a warp that create their first
  // (second, ...) candidate allocate together, so a warp makes as many passes through the
  // allocator as its busiest lane creates candidates, not one per direction any lane won.
  while (won != 0) {
    const int k = soaheap::detail::lowest_set_bit(won);
    won &= won - 1;
    const std::uint32_t neighbour = shape.neighbour(at, k);
    grid[neighbour]->agent = new (heap) Candidate(neighbour);
  }
}

template <class HeapType>
struct Automaton {
  using View = typename HeapType::View;
  Grid shape;
  Rule rule;
  std::uint64_t seed;
  std::uint32_t density_per_mille;
  soaheap::detail::Memory grid;

  std::uint64_t cells() const { return std::uint64_t{shape.width} * shape.height; }
  Cell** grid_pointer() const { return grid.as<Cell*>(); }

  static soaheap::HeapOptions heap_options(std::uint64_t cells, soaheap::Backend backend) {
    soaheap::HeapOptions options;
    options.objects = cells * 10 + 64 * 64;
    options.backend = backend;
    return options;
  }

  struct CreateInitialAgents {
    View heap;
    Cell** grid;
    Grid shape;
    std::uint64_t seed;
    std::uint32_t density;
    SOAHEAP_HD void operator()(std::uint64_t i) const {
      const std::uint32_t at = static_cast<std::uint32_t>(i);
      if (initially_alive(seed, i, density)) {
        grid[i]->agent = new (heap) Alive(at, false);
        return;
      }
      for (int k = 0; k < kNeighbours; ++k) {
        if (initially_alive(seed, shape.neighbour(at, k), density)) {
          grid[i]->agent = new (heap) Candidate(at);
          return;
        }
      }
    }
  };

  void setup(HeapType& heap) {
    grid = soaheap::detail::Memory(heap.backend(), cells() * sizeof(Cell*));
    heap.template parallel_new<Cell>(cells(), grid_pointer());
    heap.launch(cells(), CreateInitialAgents{heap.view(), grid_pointer(), shape, seed, density_per_mille});
  }

  void step(HeapType& heap, std::uint64_t step_index) const {
    const View view = heap.view();
    Cell** map = grid_pointer();
    heap.template parallel_do<Alive, &Alive::tell_neighbours<View>>(view, map, shape);
    // Candidates first: the candidates that dying cells leave behind must not be updated in the
    // step that created them (they have not been counted yet).
    heap.template parallel_do<Candidate, &Candidate::update<View>>(view, map, rule);
    heap.template parallel_do<Alive, &Alive::update<View>>(view, map, rule);
    heap.template parallel_do<Alive, &Alive::claim_candidates<View>>(view, map, shape, step_index);
    heap.template parallel_do<Alive, &Alive::create_candidates<View>>(view, map, shape, step_index);
  }

  /// Rebuilds the position map (call after a defragmentation run).
  void reregister(HeapType& heap) const { heap.template parallel_do<Cell, &Cell::register_in>(grid_pointer()); }
};


/// Compares the heap with the reference cell by cell, and checks the candidate invariant (every
/// empty cell has no alive neighbour). Returns the number of violations.
template <class HeapType>
std::uint64_t compare(const HeapType& heap, Grid shape, const Reference& reference, const char* app) {
  const std::size_t n = std::size_t{shape.width} * shape.height;
  std::vector<std::uint8_t> state(n, 0), objects(n, 0), candidate(n, 0);
  std::uint64_t uncleared = 0;  // counts left for the next step's additions
  heap.template for_each<Alive>([&](const Alive* alive) {
    const std::uint32_t at = alive->position;
    state[at] = alive->state;
    objects[at] += 1;
    uncleared += static_cast<std::uint32_t>(alive->alive_neighbours) != 0 ? 1 : 0;
  });
  heap.template for_each<Candidate>([&](const Candidate* c) {
    const std::uint32_t at = c->position;
    candidate[at] = 1;
    objects[at] += 1;
    uncleared += static_cast<std::uint32_t>(c->alive_neighbours) != 0 ? 1 : 0;
  });
  std::uint64_t linked = 0, agents = 0;
  heap.template for_each<Cell>([&](const Cell* cell) {
    if (static_cast<Agent*>(cell->agent) != nullptr) ++linked;
  });
  std::uint64_t violations = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    agents += objects[i];
    bool bad = objects[i] > 1 || state[i] != reference.states()[i];
    if (!bad && objects[i] == 0) {
      for (int k = 0; k < kNeighbours; ++k) bad = bad || reference.states()[shape.neighbour(i, k)] == 1;
    }
    if (bad) {
      if (violations < 5)
        std::fprintf(stderr, "%s self-check: cell %u: reference state %u, heap state %u (%u objects, candidate %u)\n",
                     app, i, reference.states()[i], state[i], objects[i], candidate[i]);
      ++violations;
    }
  }
  if (uncleared != 0) {
    std::fprintf(stderr, "%s self-check: %llu agents kept a neighbour count after the step\n", app,
                 static_cast<unsigned long long>(uncleared));
    ++violations;
  }
  if (linked != agents) {
    std::fprintf(stderr, "%s self-check: %llu cells point to an agent but %llu agents exist\n", app,
                 static_cast<unsigned long long>(linked), static_cast<unsigned long long>(agents));
    ++violations;
  }
  return violations;
}

}  // namespace automaton
