// Wa-Tor: fish and sharks on a torus grid of Cell objects (Dewdney 1984), the running example of
// the CompactGpu paper. Agents are created with `new` and destroyed with `destroy`, in waves, so
// this is the application where defragmentation after mass deallocation pays off.
//
// Every decision is deterministic for a seed and independent of thread scheduling: a step is split
// into "request" kernels (each agent picks a target cell from a counter-based hash and posts a
// priority to it with an atomic max) and "commit" kernels (the agent whose priority won moves).
// A sequential host reference runs exactly the same rules and is compared cell by cell.

#include "examples/common/app.cuh"
#include "examples/applications/wa_tor/rules.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace wator {

class Agent;
class Fish;
class Shark;

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes = soaheap::fields<soaheap::array<Cell*, kDirections>, Agent*, std::uint64_t, std::uint32_t>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> neighbours;
  soaheap::Field<Cell, 1> agent;
  soaheap::Field<Cell, 2> request;  ///< winning move request of the current phase (0: none)
  soaheap::Field<Cell, 3> index;    ///< y * width + x

  SOAHEAP_HD Cell(std::uint64_t new_index, Cell** grid) {
    for (int d = 0; d < kDirections; ++d) neighbours[d] = nullptr;
    agent = nullptr;
    request = 0;
    index = static_cast<std::uint32_t>(new_index);
    grid[new_index] = this;
  }

  SOAHEAP_HD void reset_request() {
    request = 0;
  }
  SOAHEAP_HD std::uint64_t* request_address() { return &static_cast<std::uint64_t&>(request); }
};

class Agent : public soaheap::Object<Agent> {
 public:
  using FieldTypes = soaheap::fields<Cell*, Cell*, std::uint32_t, std::uint32_t>;
  static constexpr const char* kName = "Agent";
  static constexpr bool kAbstract = true;
  soaheap::Field<Agent, 0> position;
  soaheap::Field<Agent, 1> target;     ///< the cell requested in this phase, or nullptr
  soaheap::Field<Agent, 2> location;   ///< index of `position` (readable in host snapshots)
  soaheap::Field<Agent, 3> breed_age;  ///< steps since the last offspring

  SOAHEAP_HD explicit Agent(Cell* cell) {
    position = cell;
    target = nullptr;
    location = cell->index;
    breed_age = 0;
  }

  /// Requests the neighbour the move rule (rules.cuh) chooses, or none.
  template <class KindOf>
  SOAHEAP_HD void post_request(std::uint8_t mover, std::uint64_t seed, std::uint64_t iteration, const KindOf& kind_of) {
    post_move_request<Cell>(*this, mover, seed, iteration, kind_of);
  }

  /// Whether this agent's request for `target` won.
  SOAHEAP_HD bool won_target() const { return won_move_request<Cell>(*this); }
};

template <class T, class View, class Pointer>
SOAHEAP_HD bool is_a(Pointer* object) {
  return soaheap::detail::class_id_of(soaheap::detail::object_bits_of(object)) == View::template class_id<T>;
}

class Fish : public soaheap::Object<Fish, Agent> {
 public:
  using FieldTypes = soaheap::fields<>;
  static constexpr const char* kName = "Fish";

  SOAHEAP_HD explicit Fish(Cell* cell) : Object(cell) {}

  /// Picks a random free neighbour and posts a move request to it.
  template <class View>
  SOAHEAP_HD void request_move(const View&, std::uint64_t seed, std::uint64_t iteration) {
    Cell* here = position;
    post_request(kFish, seed, iteration, [&](int d) {
      return static_cast<Agent*>(here->neighbours[d]->agent) == nullptr ? kEmpty : kFish;  // a fish sees only free or not
    });
  }

  template <class View>
  SOAHEAP_HD void commit_move(const View& heap, std::uint32_t breed_time) {
    breed_age += 1;
    const bool moves = won_target();
    const bool breeds = moves && breed_age >= breed_time;
    Cell* old_cell = position;
    // Reached by every fish of the warp: a child goes into its parent's block where that has room
    // (one atomic, next to the parent in memory), the others are reserved together.
    Fish* child = soaheap::create_if_near<Fish>(heap, breeds, this, old_cell);
    if (!moves) return;
    Cell* new_cell = target;
    new_cell->agent = this;
    position = new_cell;
    location = new_cell->index;
    if (breeds) breed_age = 0;
    old_cell->agent = child;
  }
};

class Shark : public soaheap::Object<Shark, Agent> {
 public:
  using FieldTypes = soaheap::fields<std::uint32_t>;
  static constexpr const char* kName = "Shark";
  soaheap::Field<Shark, 0> hunger;  ///< steps since the last meal

  SOAHEAP_HD explicit Shark(Cell* cell) : Object(cell) { hunger = 0; }

  /// Prefers a random neighbour with a fish; otherwise a random free neighbour.
  template <class View>
  SOAHEAP_HD void request_move(const View&, std::uint64_t seed, std::uint64_t iteration) {
    Cell* here = position;
    post_request(kShark, seed, iteration, [&](int d) {
      Agent* occupant = here->neighbours[d]->agent;
      return occupant == nullptr ? kEmpty : is_a<Fish, View>(occupant) ? kFish : kShark;
    });
  }

  template <class View>
  SOAHEAP_HD void commit_move(const View& heap, std::uint32_t breed_time, std::uint32_t starve_time) {
    breed_age += 1;
    bool ate = false;
    const bool moves = won_target();
    const bool breeds = moves && breed_age >= breed_time;
    Cell* old_cell = position;
    // Reserved together, but not next to the parent: that made this kernel slower
    // (docs/decisions/006-create-if-near.md).
    Shark* child = soaheap::create_if<Shark>(heap, breeds, old_cell);
    if (moves) {
      Cell* new_cell = target;
      Agent* prey = new_cell->agent;
      if (prey != nullptr) {
        soaheap::destroy(heap, prey);
        ate = true;
      }
      new_cell->agent = this;
      position = new_cell;
      location = new_cell->index;
      if (breeds) breed_age = 0;
      old_cell->agent = child;
    }
    if (ate) {
      hunger = 0;
    } else {
      hunger += 1;
      if (static_cast<std::uint32_t>(hunger) >= starve_time) {
        Cell* cell = position;
        cell->agent = nullptr;
        soaheap::destroy(heap, this);
      }
    }
  }
};

using WatorHeap = soaheap::Heap<Cell, Agent, Fish, Shark>;
using View = WatorHeap::View;

/// Links every cell to its four torus neighbours.
struct LinkNeighbours {
  Cell** grid;
  std::uint32_t width, height;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const std::uint32_t x = static_cast<std::uint32_t>(i % width), y = static_cast<std::uint32_t>(i / width);
    Cell* cell = grid[i];
    cell->neighbours[0] = grid[((y + height - 1) % height) * width + x];
    cell->neighbours[1] = grid[y * width + (x + 1) % width];
    cell->neighbours[2] = grid[((y + 1) % height) * width + x];
    cell->neighbours[3] = grid[y * width + (x + width - 1) % width];
  }
};

/// Populates the grid with fish and sharks (the initial state is a pure function of the seed).
struct Populate {
  View heap;
  Cell** grid;
  std::uint64_t seed;
  Rules rules;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    Cell* cell = grid[i];
    const std::uint8_t kind = initial_kind(seed, i, rules);
    if (kind == kFish) cell->agent = new (heap) Fish(cell);
    if (kind == kShark) cell->agent = new (heap) Shark(cell);
  }
};

// ---- the simulation on a heap ----------------------------------------------------------------------

/// Grid sides: --size is the width; the grid is size x size.
struct Simulation {
  std::uint32_t width, height;
  std::uint64_t seed;
  Rules rules;

  static soaheap::HeapOptions heap_options(std::uint32_t width, std::uint32_t height, soaheap::Backend backend) {
    soaheap::HeapOptions options;
    // Cells fill their blocks; fish and sharks can together occupy every cell, and blocks of the
    // agents are fragmented in waves, so leave room for about three agents per cell.
    options.objects = std::uint64_t{width} * height * 8 + 64 * 64;
    options.backend = backend;
    return options;
  }

  void setup(WatorHeap& heap) {
    const std::uint64_t cells = std::uint64_t{width} * height;
    soaheap::detail::Memory grid(heap.backend(), cells * sizeof(Cell*));
    heap.parallel_new<Cell>(cells, grid.as<Cell*>());
    heap.launch(cells, LinkNeighbours{grid.as<Cell*>(), width, height});
    heap.launch(cells, Populate{heap.view(), grid.as<Cell*>(), seed, rules});
  }

  void step(WatorHeap& heap, std::uint64_t iteration) const {
    const View view = heap.view();
    heap.parallel_do<Cell, &Cell::reset_request>();
    heap.parallel_do<Fish, &Fish::request_move<View>>(view, seed, iteration);
    heap.parallel_do<Fish, &Fish::commit_move<View>>(view, rules.fish_breed_time);
    heap.parallel_do<Cell, &Cell::reset_request>();
    heap.parallel_do<Shark, &Shark::request_move<View>>(view, seed, iteration);
    heap.parallel_do<Shark, &Shark::commit_move<View>>(view, rules.shark_breed_time, rules.shark_starve_time);
  }

  /// Compares the heap's grid with the reference cell by cell; returns the number of mismatches.
  std::uint64_t compare(const WatorHeap& heap, const Reference& reference) const {
    const std::uint64_t cells = std::uint64_t{width} * height;
    std::vector<ReferenceCell> seen(cells);
    std::vector<int> occupants(cells, 0);
    heap.for_each<Fish>([&](const Fish* fish) {
      const std::uint32_t at = fish->location;
      occupants[at] += 1;
      seen[at] = ReferenceCell{kFish, fish->breed_age, 0};
    });
    heap.for_each<Shark>([&](const Shark* shark) {
      const std::uint32_t at = shark->location;
      occupants[at] += 1;
      seen[at] = ReferenceCell{kShark, shark->breed_age, shark->hunger};
    });
    std::uint64_t occupied_cells = 0;
    heap.for_each<Cell>([&](const Cell* cell) {
      if (static_cast<Agent*>(cell->agent) != nullptr) ++occupied_cells;
    });
    std::uint64_t mismatches = 0, agents = 0;
    for (std::uint64_t i = 0; i < cells; ++i) {
      const ReferenceCell& want = reference.cells()[i];
      const ReferenceCell& got = seen[i];
      agents += occupants[i];
      if (occupants[i] > 1 || want.kind != got.kind || want.breed_age != got.breed_age || want.hunger != got.hunger) {
        if (mismatches < 5)
          std::fprintf(stderr, "wa_tor self-check: cell %llu: reference kind %d age %u hunger %u, heap kind %d age %u hunger %u (%d agents)\n",
                       static_cast<unsigned long long>(i), want.kind, want.breed_age, want.hunger, got.kind, got.breed_age,
                       got.hunger, occupants[i]);
        ++mismatches;
      }
    }
    if (occupied_cells != agents) {
      std::fprintf(stderr, "wa_tor self-check: %llu cells point to an agent but %llu agents exist\n",
                   static_cast<unsigned long long>(occupied_cells), static_cast<unsigned long long>(agents));
      ++mismatches;
    }
    return mismatches;
  }
};

}  // namespace wator

namespace {

/// Largest grid side the self-check compares on the full run; larger runs check a side-run of
/// this size with the same seed, policy and iterations.
constexpr std::uint32_t kReferenceMaxSide = 256;

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli("Wa-Tor: fish and sharks on a torus grid of cell objects (agents are created and destroyed)", soaheap_app::AppDefaults{64, 4096, 60, 500});
  wator::Rules rules;
  wator::add_options(cli, rules);
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();

  const std::uint32_t side = static_cast<std::uint32_t>(options.size);
  wator::Simulation simulation{side, side, options.seed, rules};

  std::uint64_t mismatches = 0;
  const auto check_run = [&](wator::WatorHeap& heap, const wator::Simulation& sim, auto&& run_iterations) {
    wator::Reference reference(sim.width, sim.height, sim.seed, sim.rules);
    run_iterations();
    for (int it = 0; it < options.iterations; ++it) reference.step(it);
    return sim.compare(heap, reference);
  };

  wator::WatorHeap heap(soaheap_app::heap_options_for(wator::Simulation::heap_options(side, side, options.backend), options));
  soaheap_app::AppRun<wator::WatorHeap> run("wa_tor", options, heap);
  // Agents do not move in memory when they move on the grid; compacted in the order of their
  // cells, neighbouring threads read neighbouring cells again.
  run.define_order<wator::Fish>("field:position", soaheap::order_by_pointer_field<&wator::Agent::position>());
  run.define_order<wator::Shark>("field:position", soaheap::order_by_pointer_field<&wator::Agent::position>());
  simulation.setup(heap);
  const auto run_main = [&] {
    for (int it = 0; it < options.iterations; ++it) {
      simulation.step(heap, it);
      run.after_iteration(it);
    }
    run.stop_clock();
  };
  if (side <= kReferenceMaxSide) {
    mismatches = check_run(heap, simulation, run_main);
  } else {
    run_main();
  }
  heap.validate();  // throws (exit code 2) when a heap invariant or a pointer field is broken
  const std::uint64_t fish = heap.count<wator::Fish>(), sharks = heap.count<wator::Shark>();
  if (side > kReferenceMaxSide) {
    // The full run is too large for a sequential reference: check a small run with the same rules.
    wator::Simulation small{kReferenceMaxSide, kReferenceMaxSide, options.seed, rules};
    wator::WatorHeap small_heap(wator::Simulation::heap_options(small.width, small.height, options.backend));
    small.setup(small_heap);
    mismatches = check_run(small_heap, small, [&] {
      for (int it = 0; it < options.iterations; ++it) small.step(small_heap, it);
    });
  }
  soaheap_app::Result extra;
  extra["grid"] = {side, side};
  extra["fish"] = fish;
  extra["sharks"] = sharks;
  extra["self_check_mismatches"] = mismatches;
  return run.finish(mismatches == 0, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("wa_tor", [&] { return run_app(argc, argv); });
}
