// Sugarscape (Epstein & Axtell), the simple variant of the DynaSOAr paper (Section 6, category 3):
// a torus grid of Cell objects holding regrowing sugar, and Agent objects with vision, metabolism
// and age that move to the richest visible cell, eat, age, mate (new Agent objects) and die
// (destroy). Conflicts (two agents wanting one cell, two mothers wanting one father or one birth
// cell) are resolved in two phases: requests post hashed priorities with atomic max, and only
// the winner acts in the next kernel, so results do not depend on thread order. A sequential
// host reference runs the same rules and is compared cell by cell.

#include "examples/common/app.cuh"
#include "examples/common/reference_check.cuh"
#include "examples/applications/sugarscape/rules.cuh"

#include <soaheap/soaheap.cuh>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sugarscape {

class Agent;

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes =
      soaheap::fields<soaheap::array<Cell*, kDirections>, Agent*, int, int, std::uint64_t, std::uint64_t, std::uint32_t>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> neighbours;
  soaheap::Field<Cell, 1> agent;
  soaheap::Field<Cell, 2> sugar;
  soaheap::Field<Cell, 3> capacity;
  soaheap::Field<Cell, 4> move_reservation;
  soaheap::Field<Cell, 5> birth_reservation;
  soaheap::Field<Cell, 6> id;

  SOAHEAP_HD Cell(std::uint32_t new_id, const World& world) {
    for (int d = 0; d < kDirections; ++d) neighbours[d] = nullptr;
    agent = nullptr;
    capacity = world.capacity(new_id);
    sugar = world.capacity(new_id);
    move_reservation = 0;
    birth_reservation = 0;
    id = new_id;
  }

  SOAHEAP_HD void regrow(World world) {
    const int grown = sugar + world.regrowth;
    sugar = grown < capacity ? grown : static_cast<int>(capacity);
    move_reservation = 0;
    birth_reservation = 0;
  }

  template <class View>
  SOAHEAP_HD void place_initial_agent(const View& heap, World world);
};

class Agent : public soaheap::Object<Agent> {
 public:
  using FieldTypes = soaheap::fields<Cell*, Cell*, Agent*, std::uint64_t, std::uint64_t, int, int, int, int, int,
                                     int, std::uint32_t>;
  static constexpr const char* kName = "Agent";
  soaheap::Field<Agent, 0> cell;
  soaheap::Field<Agent, 1> target;        ///< cell chosen this step (move, then birth)
  soaheap::Field<Agent, 2> partner;       ///< father chosen this step (females)
  soaheap::Field<Agent, 3> id;
  soaheap::Field<Agent, 4> mate_request;  ///< highest priority of a mother that chose this agent
  soaheap::Field<Agent, 5> wealth;
  soaheap::Field<Agent, 6> metabolism;
  soaheap::Field<Agent, 7> vision;
  soaheap::Field<Agent, 8> age;
  soaheap::Field<Agent, 9> max_age;
  soaheap::Field<Agent, 10> female;
  soaheap::Field<Agent, 11> cell_id;

  SOAHEAP_HD Agent(Cell* home, std::uint64_t new_id, int new_wealth, const World& world) {
    const Traits traits = world.traits(new_id);
    cell = home;
    target = nullptr;
    partner = nullptr;
    id = new_id;
    mate_request = 0;
    wealth = new_wealth;
    metabolism = traits.metabolism;
    vision = traits.vision;
    age = 0;
    max_age = traits.max_age;
    female = traits.female;
    cell_id = home->id;
  }

  /// Picks the richest free cell within vision along the four lattice directions (or stays) and
  /// reserves it.
  SOAHEAP_HD void request_move(World world, std::uint64_t iteration) {
    mate_request = 0;
    Cell* home = cell;
    Cell* best = home;
    int best_sugar = home->sugar, best_distance = 0;
    std::uint64_t best_tie = hash4(world.seed, kSaltTie, iteration, home->id);
    for (int d = 0; d < kDirections; ++d) {
      Cell* look = home;
      for (int distance = 1; distance <= vision; ++distance) {
        look = look->neighbours[d];
        if (look == home || look->agent != nullptr) continue;
        const std::uint64_t tie = hash4(world.seed, kSaltTie, iteration, look->id);
        if (world.better(look->sugar, distance, tie, best_sugar, best_distance, best_tie)) {
          best = look;
          best_sugar = look->sugar;
          best_distance = distance;
          best_tie = tie;
        }
      }
    }
    target = best;
    if (best != home)
      atomic_max(&static_cast<std::uint64_t&>(best->move_reservation), world.priority(kSaltMovePriority, iteration, cell_id));
  }

  /// Moves if this agent won its target, then eats, metabolizes, ages and maybe dies.
  template <class View>
  SOAHEAP_HD void move_and_eat(const View& heap, World world, std::uint64_t iteration) {
    Cell* home = cell;
    Cell* chosen = target;
    if (chosen != home &&
        static_cast<std::uint64_t>(chosen->move_reservation) == world.priority(kSaltMovePriority, iteration, cell_id)) {
      home->agent = nullptr;
      chosen->agent = this;
      cell = chosen;
      cell_id = chosen->id;
      home = chosen;
    }
    wealth += home->sugar - metabolism;
    home->sugar = 0;
    age += 1;
    if (wealth <= 0 || age >= max_age) {
      home->agent = nullptr;
      soaheap::destroy(heap, this);
    }
  }

  /// A fertile female picks a fertile male neighbour and a free neighbouring birth cell.
  SOAHEAP_HD void request_mate(World world, std::uint64_t iteration) {
    partner = nullptr;
    target = nullptr;
    if (female == 0 || !world.fertile(age, wealth)) return;
    Cell* home = cell;
    Agent* father = nullptr;
    Cell* birth = nullptr;
    const int first = static_cast<int>(hash4(world.seed, kSaltBirthDirection, iteration, cell_id) % kDirections);
    for (int k = 0; k < kDirections; ++k) {
      Cell* next = home->neighbours[(first + k) % kDirections];
      Agent* other = next->agent;
      if (other == nullptr) {
        if (birth == nullptr) birth = next;
      } else if (father == nullptr && other->female == 0 && world.fertile(other->age, other->wealth)) {
        father = other;
      }
    }
    if (father == nullptr || birth == nullptr) return;
    const std::uint64_t key = world.priority(kSaltMatePriority, iteration, cell_id);
    partner = father;
    target = birth;
    atomic_max(&static_cast<std::uint64_t&>(father->mate_request), key);
    atomic_max(&static_cast<std::uint64_t&>(birth->birth_reservation), key);
  }

  /// If both the father and the birth cell were won, the child gets half of each parent's wealth.
  template <class View>
  SOAHEAP_HD void give_birth(const View& heap, World world, std::uint64_t iteration) {
    Agent* father = partner;
    Cell* birth = target;
    if (father == nullptr) return;
    const std::uint64_t key = world.priority(kSaltMatePriority, iteration, cell_id);
    if (static_cast<std::uint64_t>(father->mate_request) != key ||
        static_cast<std::uint64_t>(birth->birth_reservation) != key)
      return;
    const int from_mother = wealth / 2, from_father = father->wealth / 2;
    // Into the mother's block where it has room: one atomic instead of a search, and the child
    // next to her in memory, as it is on the grid.
    Agent* child = soaheap::create_if_near<Agent>(heap, true, this, birth, world.child_id(iteration, birth->id),
                                                  from_mother + from_father, world);
    if (child == nullptr) return;  // out of memory: recorded by the heap and reported by the host
    wealth -= from_mother;
    father->wealth -= from_father;
    birth->agent = child;
  }
};

template <class View>
SOAHEAP_HD void Cell::place_initial_agent(const View& heap, World world) {
  if (!world.initially_occupied(id)) return;
  agent = new (heap) Agent(this, id, world.traits(id).endowment, world);
}

using SugarHeap = soaheap::Heap<Cell, Agent>;
using View = SugarHeap::View;

struct CreateCells {
  View heap;
  Cell** cells;
  World world;
  SOAHEAP_HD void operator()(std::uint64_t tid) const { cells[tid] = new (heap) Cell(static_cast<std::uint32_t>(tid), world); }
};

struct LinkCells {
  Cell** cells;
  World world;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    for (int d = 0; d < kDirections; ++d)
      cells[tid]->neighbours[d] = cells[world.neighbour(static_cast<std::uint32_t>(tid), d)];
  }
};

class Simulation {
 public:
  explicit Simulation(const World& world) : world_(world) {}

  static soaheap::HeapOptions heap_options(const World& world, soaheap::Backend backend) {
    soaheap::HeapOptions options;
    options.objects = 3ull * world.cell_count() + 64 * 64;
    options.backend = backend;
    return options;
  }

  /// Agents are best visited in the order of their cells: neighbouring threads then read
  /// neighbouring cells (the policies compact Agents in this order).
  static void define_orders(soaheap_app::AppRun<SugarHeap>& run) {
    run.define_order<Agent>("field:cell", soaheap::order_by_pointer_field<&Agent::cell>());
  }

  void setup(SugarHeap& heap) const {
    soaheap::detail::Memory cells(heap.backend(), world_.cell_count() * sizeof(Cell*));
    // A growing heap maps the cells' blocks before the kernel that creates them all: one kernel
    // may grow the heap only to growth_headroom times its size at launch.
    if (heap.growable())
      heap.reserve_blocks(heap.mapped_block_count() + world_.cell_count() / SugarHeap::capacity<Cell> + 1);
    heap.launch(world_.cell_count(), CreateCells{heap.view(), cells.as<Cell*>(), world_});
    heap.launch(world_.cell_count(), LinkCells{cells.as<Cell*>(), world_});
    heap.parallel_do<Cell, &Cell::place_initial_agent<View>>(heap.view(), world_);
  }

  void step(SugarHeap& heap, std::uint64_t iteration) const {
    heap.parallel_do<Cell, &Cell::regrow>(world_);
    heap.parallel_do<Agent, &Agent::request_move>(world_, iteration);
    heap.parallel_do<Agent, &Agent::move_and_eat<View>>(heap.view(), world_, iteration);
    heap.parallel_do<Agent, &Agent::request_mate>(world_, iteration);
    heap.parallel_do<Agent, &Agent::give_birth<View>>(heap.view(), world_, iteration);
  }

  const World& world() const { return world_; }

 private:
  World world_;
};

/// Cells whose sugar or agent on @p heap differ from @p reference (an agent on a cell that already
/// has one counts as a mismatch too).
inline std::uint64_t compare(const Reference& reference, const World& world, const SugarHeap& heap) {
  std::uint64_t mismatches = 0;
  std::vector<int> sugar(world.cell_count(), -1);
  heap.for_each<Cell>([&](const Cell* cell) { sugar[cell->id] = cell->sugar; });
  std::vector<std::optional<Reference::Person>> seen(world.cell_count());
  heap.for_each<Agent>([&](const Agent* agent) {
    const std::uint32_t c = agent->cell_id;
    if (c >= seen.size() || seen[c]) {
      ++mismatches;
      return;
    }
    seen[c] = Reference::Person{agent->id, agent->wealth, agent->metabolism, agent->vision, agent->age,
                                agent->max_age, agent->female};
  });
  return mismatches + reference.compare(sugar, seen);
}

}  // namespace sugarscape

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::AppOptions options;
  sugarscape::World world;
  if (const auto exit_code = soaheap_app::parse_with_model(
          argc, argv,
          "Sugarscape: agents on a torus grid of Cell objects consume sugar, age, mate (new Agent objects) and "
          "die (destroy). --size is the side of the grid",
          sugarscape::kRunDefaults, sugarscape::world_of, options, world))
    return *exit_code;

  return soaheap_app::run_checked_simulation<sugarscape::Simulation, sugarscape::Reference, sugarscape::SugarHeap>(
      "sugarscape", options, world, sugarscape::side_run_of(world),
      [](const auto& reference, const auto& checked_model, const auto& checked) {
        return sugarscape::compare(reference, checked_model, checked);
      },
      [&](const sugarscape::SugarHeap& heap, soaheap_app::Result& extra) {
        extra["grid"] = {world.side, world.side};
        extra["agents"] = heap.count<sugarscape::Agent>();
      });
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("sugarscape", [&] { return run_app(argc, argv); });
}
