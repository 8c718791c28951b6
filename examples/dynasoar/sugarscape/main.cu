// DynaSOAr's sugarscape model written with soaheap's native API: the rules, constants, random
// draws and kernel sequence of the sugarscape program in DynaSOAr's example folder
// (example/sugarscape/dynasoar), so that the same program built through the DynaSOAr shim
// (compat/shim) can be compared with it at equal parameters — the comparison of issue 20,
// tools/gpu/dynasoar-examples.sh compare. examples/sugarscape is soaheap's own sugarscape (other
// rules, a host reference check); this one exists to measure what the shim costs.
//
// The model: a square (not toroidal) grid of Cell objects whose sugar grows and diffuses to the
// cells within distance 2; Male and Female agents (an abstract Agent class) age and burn sugar, die,
// move to the free cell with the most sugar in their vision (cells grant one request each, chosen
// at random), harvest it, and mate: a ready male proposes to the richest ready female in sight,
// each female accepts the richest proposer, the pair's child is born on a free cell next to the
// father that grants it. Every random number comes from the curandState_t of a cell or an agent,
// as in DynaSOAr's program, so on the GPU both draw the same numbers (checksum below).
//
// Self-check: every agent's cell holds it, every occupied cell's agent is on it, the heap
// validates; `checksum` is DynaSOAr's (the sum over cells of 1 per male and 2 per female).

#include "examples/common/app.cuh"
#include "examples/common/curand_state.cuh"
#include "examples/common/dynasoar_port.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>
#include <string>

namespace dynasoar_sugarscape {

// DynaSOAr's example/sugarscape/configuration.h.
constexpr int kSeed = 42;
constexpr float kProbMale = 0.12f;
constexpr float kProbFemale = 0.15f;
constexpr int kMaxVision = 2;
constexpr int kMaxAge = 100;
constexpr int kMaxEndowment = 200;
constexpr int kMaxMetabolism = 80;
constexpr int kSugarCapacity = 3500;
constexpr int kMaxSugarDiffusion = 60;
constexpr float kSugarDiffusionRate = 0.125f;
constexpr int kMinMatingAge = 22;
constexpr int kMaxChildren = 8;

class Agent;
class Male;
class Female;

/// The grid: side length and the cell of every position (row-major).
struct Grid {
  int size;
  class Cell** cells;
  SOAHEAP_HD Cell* at(int x, int y) const { return cells[x + y * size]; }
  SOAHEAP_HD bool contains(int x, int y) const { return x >= 0 && x < size && y >= 0 && y < size; }
  /// Calls visit(cell) for every cell of the grid within distance @p range of cell @p id (itself
  /// only when @p with_self), column by column as DynaSOAr's loops go: the order decides which of
  /// equal candidates the random draws pick.
  template <class Visit>
  SOAHEAP_HD void for_each_within(int id, int range, bool with_self, Visit&& visit) const {
    const int this_x = id % size;
    const int this_y = id / size;
    for (int dx = -range; dx <= range; ++dx) {
      for (int dy = -range; dy <= range; ++dy) {
        if ((with_self || dx != 0 || dy != 0) && contains(this_x + dx, this_y + dy)) visit(at(this_x + dx, this_y + dy));
      }
    }
  }
};

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes = soaheap::fields<curandState_t, Agent*, int, int, int, int, int>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> random_state;
  soaheap::Field<Cell, 1> agent;
  soaheap::Field<Cell, 2> sugar_diffusion;
  soaheap::Field<Cell, 3> sugar;
  soaheap::Field<Cell, 4> sugar_capacity;
  soaheap::Field<Cell, 5> grow_rate;
  soaheap::Field<Cell, 6> cell_id;

  SOAHEAP_HD Cell(int seed, int initial_sugar, int capacity, int max_grow_rate, int id) {
    agent = nullptr;
    sugar_diffusion = 0;
    sugar = initial_sugar;
    sugar_capacity = capacity;
    cell_id = id;
    soaheap_app::random_init(seed, id, random_state.address());
    // 2 % of the cells grow at the full rate, 2 % at half, 4 % at a quarter, the rest not at all
    // (the rates as DynaSOAr computes them: in double, truncated).
    const float r = random_float();
    if (r <= 0.02) {
      grow_rate = max_grow_rate;
    } else if (r <= 0.04) {
      grow_rate = static_cast<int>(0.5 * max_grow_rate);
    } else if (r <= 0.08) {
      grow_rate = static_cast<int>(0.25 * max_grow_rate);
    } else {
      grow_rate = 0;
    }
  }

  SOAHEAP_HD float random_float() { return soaheap_app::random_uniform(random_state.address()); }
  /// A number in [a, b), computed in unsigned arithmetic as DynaSOAr's `curand() % (b - a) + a`.
  SOAHEAP_HD int random_int(int a, int b) {
    return static_cast<int>(soaheap_app::random_bits(random_state.address()) % static_cast<unsigned>(b - a) +
                            static_cast<unsigned>(a));
  }

  SOAHEAP_HD bool is_free() const { return static_cast<Agent*>(agent) == nullptr; }
  SOAHEAP_HD void enter(Agent* arriving) { agent = arriving; }
  SOAHEAP_HD void leave() { agent = nullptr; }
  SOAHEAP_HD void take_sugar(int amount) { sugar -= amount; }

  SOAHEAP_HD void grow_sugar() {
    const int room = sugar_capacity - sugar;
    const int rate = grow_rate;
    sugar += room < rate ? room : rate;
  }

  SOAHEAP_HD void prepare_diffuse() {
    int diffusion = static_cast<int>(kSugarDiffusionRate * sugar);
    if (diffusion > kMaxSugarDiffusion) diffusion = kMaxSugarDiffusion;
    sugar_diffusion = diffusion;
    sugar -= diffusion;
  }

  /// Adds an eighth of what every cell within distance kMaxVision gave off (DynaSOAr's rule: the
  /// sum is an int that each addition converts through float).
  SOAHEAP_HD void update_diffuse(Grid grid) {
    int new_sugar = 0;
    grid.for_each_within(cell_id, kMaxVision, false, [&](Cell* neighbour) {
      new_sugar = static_cast<int>(static_cast<float>(new_sugar) + 0.125f * static_cast<int>(neighbour->sugar_diffusion));
    });
    sugar += new_sugar;
  }

  /// Grants this cell to one of the agents in reach that asked for it, chosen uniformly.
  SOAHEAP_HD void decide_permission(Grid grid);

  /// Self-check: counts[2] occupied cells, counts[3] those whose agent is on another cell,
  /// counts[4] DynaSOAr's checksum (1 per male, 2 per female).
  template <class View>
  SOAHEAP_HD void check(const View& heap, std::uint64_t* counts);
};

class Agent : public soaheap::Object<Agent> {
 public:
  using FieldTypes = soaheap::fields<curandState_t, Cell*, Cell*, int, int, int, int, int, int, bool>;
  static constexpr const char* kName = "Agent";
  static constexpr bool kAbstract = true;
  soaheap::Field<Agent, 0> random_state;
  soaheap::Field<Agent, 1> cell;
  soaheap::Field<Agent, 2> cell_request;
  soaheap::Field<Agent, 3> vision;
  soaheap::Field<Agent, 4> age;
  soaheap::Field<Agent, 5> max_age;
  soaheap::Field<Agent, 6> sugar;
  soaheap::Field<Agent, 7> metabolism;
  soaheap::Field<Agent, 8> endowment;
  soaheap::Field<Agent, 9> permission;

  SOAHEAP_HD Agent(Cell* home, int new_vision, int new_age, int new_max_age, int new_endowment, int new_metabolism,
                   int grid_cells) {
    cell = home;
    cell_request = nullptr;
    vision = new_vision;
    age = new_age;
    max_age = new_max_age;
    sugar = new_endowment;
    endowment = new_endowment;
    metabolism = new_metabolism;
    permission = false;
    soaheap_app::random_init(static_cast<unsigned long long>(home->random_int(0, grid_cells)), 0, random_state.address());
  }

  SOAHEAP_HD float random_float() { return soaheap_app::random_uniform(random_state.address()); }
  SOAHEAP_HD void give_permission() { permission = true; }
  SOAHEAP_HD void take_sugar(int amount) { sugar -= amount; }
  /// Half of the endowment goes to a child, and the parent still needs some to survive.
  SOAHEAP_HD bool ready_to_mate() const { return sugar >= endowment * 2 / 3 && age >= kMinMatingAge; }

  template <class View>
  SOAHEAP_HD void age_and_metabolize(const View& heap) {
    age += 1;
    bool dead = age > max_age;
    sugar -= metabolism;
    dead = dead || sugar <= 0;
    if (dead) {
      static_cast<Cell*>(cell)->leave();
      soaheap::destroy(heap, this);
    }
  }

  /// Asks for the free cell in sight with the most sugar (ties broken uniformly at random).
  SOAHEAP_HD void prepare_move(Grid grid) {
    int turn = 0;
    Cell* target_cell = nullptr;
    int target_sugar = 0;
    grid.for_each_within(static_cast<Cell*>(cell)->cell_id, vision, false, [&](Cell* neighbour) {
      if (!neighbour->is_free()) return;
      const int available = neighbour->sugar;
      if (available > target_sugar) {
        target_cell = neighbour;
        target_sugar = available;
        turn = 1;
      } else if (available == target_sugar) {
        if (random_float() <= 1.0f / (++turn)) target_cell = neighbour;
      }
    });
    cell_request = target_cell;
  }

  SOAHEAP_HD void harvest_sugar() {
    Cell* here = cell;
    const int amount = here->sugar;
    here->take_sugar(amount);
    sugar += amount;
  }

  SOAHEAP_HD void update_move() {
    if (permission) {
      Cell* target = cell_request;
      static_cast<Cell*>(cell)->leave();
      target->enter(this);
      cell = target;
    }
    harvest_sugar();
    cell_request = nullptr;
    permission = false;
  }

  /// Self-check: counts[0] agents, counts[1] agents whose cell does not hold them.
  SOAHEAP_HD void check(std::uint64_t* counts) {
    soaheap::detail::atomic_fetch_add(&counts[0], 1);
    if (static_cast<Agent*>(static_cast<Cell*>(cell)->agent) != this) soaheap::detail::atomic_fetch_add(&counts[1], 1);
  }
};

template <class T, class View>
SOAHEAP_HD T* as(Agent* agent) {
  if (agent == nullptr) return nullptr;
  return soaheap::detail::class_id_of(soaheap::detail::object_bits_of(agent)) == View::template class_id<T>
             ? static_cast<T*>(agent)
             : nullptr;
}

class Female : public soaheap::Object<Female, Agent> {
 public:
  using FieldTypes = soaheap::fields<int, int>;
  static constexpr const char* kName = "Female";
  soaheap::Field<Female, 0> max_children;
  soaheap::Field<Female, 1> num_children;

  SOAHEAP_HD Female(Cell* home, int new_vision, int new_age, int new_max_age, int new_endowment, int new_metabolism,
                    int new_max_children, int grid_cells)
      : Object(home, new_vision, new_age, new_max_age, new_endowment, new_metabolism, grid_cells) {
    max_children = new_max_children;
    num_children = 0;
  }

  /// Accepts the richest male in reach that proposed to this female.
  template <class View>
  SOAHEAP_HD void decide_proposal(const View& heap, Grid grid);
};

class Male : public soaheap::Object<Male, Agent> {
 public:
  using FieldTypes = soaheap::fields<Female*, bool>;
  static constexpr const char* kName = "Male";
  soaheap::Field<Male, 0> female_request;
  soaheap::Field<Male, 1> proposal_accepted;

  SOAHEAP_HD Male(Cell* home, int new_vision, int new_age, int new_max_age, int new_endowment, int new_metabolism,
                  int grid_cells)
      : Object(home, new_vision, new_age, new_max_age, new_endowment, new_metabolism, grid_cells) {
    female_request = nullptr;
    proposal_accepted = false;
  }

  /// Proposes to the ready female in sight with the most sugar.
  template <class View>
  SOAHEAP_HD void propose(const View& heap, Grid grid) {
    (void)heap;
    if (!ready_to_mate()) return;
    Female* target_agent = nullptr;
    int target_sugar = -1;
    grid.for_each_within(static_cast<Cell*>(cell)->cell_id, vision, true, [&](Cell* neighbour) {
      Female* female = as<Female, View>(neighbour->agent);
      if (female != nullptr && female->ready_to_mate() && female->sugar > target_sugar) {
        target_agent = female;
        target_sugar = female->sugar;
      }
    });
    female_request = target_agent;
  }

  SOAHEAP_HD void accept_proposal() { proposal_accepted = true; }

  /// An accepted male asks for a free cell in sight for the child, chosen uniformly.
  SOAHEAP_HD void propose_offspring_target(Grid grid) {
    if (!proposal_accepted) return;
    Cell* target_cell = nullptr;
    int turn = 0;
    grid.for_each_within(static_cast<Cell*>(cell)->cell_id, vision, false, [&](Cell* neighbour) {
      if (!neighbour->is_free()) return;
      ++turn;
      if (random_float() <= 1.0f / turn) target_cell = neighbour;
    });
    cell_request = target_cell;
  }

  /// With the female's acceptance and the cell's permission: the child (male or female with equal
  /// chance) gets the parents' mean traits and half of each parent's endowment.
  template <class View>
  SOAHEAP_HD void mate(const View& heap, Grid grid) {
    if (proposal_accepted && permission) {
      Female* mother = female_request;
      Cell* birth_cell = cell_request;
      mother->num_children += 1;
      const int child_endowment = (endowment + mother->endowment) / 2;
      sugar -= endowment / 2;
      mother->take_sugar(mother->endowment / 2);
      const int child_vision = (vision + mother->vision) / 2;
      const int child_max_age = (max_age + mother->max_age) / 2;
      const int child_metabolism = (metabolism + mother->metabolism) / 2;
      const int grid_cells = grid.size * grid.size;
      Agent* child;
      if (random_float() <= 0.5f) {
        child = new (heap) Male(birth_cell, child_vision, 0, child_max_age, child_endowment, child_metabolism, grid_cells);
      } else {
        child = new (heap) Female(birth_cell, child_vision, 0, child_max_age, child_endowment, child_metabolism,
                                  mother->max_children, grid_cells);
      }
      // Out of memory: no child (the heap reports it at its next host call).
      if (child != nullptr) birth_cell->enter(child);
    }
    permission = false;
    proposal_accepted = false;
    female_request = nullptr;
    cell_request = nullptr;
  }

};

SOAHEAP_HD inline void Cell::decide_permission(Grid grid) {
  Agent* selected_agent = nullptr;
  int turn = 0;
  grid.for_each_within(cell_id, kMaxVision, true, [&](Cell* neighbour) {
    Agent* asking = neighbour->agent;
    if (asking == nullptr || static_cast<Cell*>(asking->cell_request) != this) return;
    ++turn;
    if (random_float() <= 1.0f / turn) selected_agent = asking;
  });
  if (selected_agent != nullptr) selected_agent->give_permission();
}

template <class View>
SOAHEAP_HD void Female::decide_proposal(const View& heap, Grid grid) {
  (void)heap;
  if (num_children >= max_children) return;
  Male* selected_agent = nullptr;
  int selected_sugar = -1;
  grid.for_each_within(static_cast<Cell*>(cell)->cell_id, kMaxVision, true, [&](Cell* neighbour) {
    Male* male = as<Male, View>(neighbour->agent);
    if (male != nullptr && static_cast<Female*>(male->female_request) == this && male->sugar > selected_sugar) {
      selected_agent = male;
      selected_sugar = male->sugar;
    }
  });
  if (selected_agent != nullptr) selected_agent->accept_proposal();
}

template <class View>
SOAHEAP_HD void Cell::check(const View& heap, std::uint64_t* counts) {
  (void)heap;
  Agent* occupant = agent;
  if (occupant == nullptr) return;
  soaheap::detail::atomic_fetch_add(&counts[2], 1);
  if (static_cast<Cell*>(occupant->cell) != this) soaheap::detail::atomic_fetch_add(&counts[3], 1);
  soaheap::detail::atomic_fetch_add(&counts[4], as<Male, View>(occupant) != nullptr ? 1 : 2);
}

using SugarscapeHeap = soaheap::Heap<Agent, Male, Female, Cell>;
using View = SugarscapeHeap::View;

struct CreateCells {
  View heap;
  Grid grid;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    grid.cells[i] = new (heap) Cell(kSeed, /*initial_sugar=*/0, kSugarCapacity, /*max_grow_rate=*/50, static_cast<int>(i));
  }
};

/// An agent on 27 % of the cells (12 % male, 15 % female), traits drawn from the cell's generator.
struct CreateAgents {
  View heap;
  Grid grid;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    Cell* home = grid.cells[i];
    const float r = home->random_float();
    const int vision = kMaxVision / 2 + home->random_int(0, kMaxVision / 2);
    const int max_age = kMaxAge * 2 / 3 + home->random_int(0, kMaxAge / 3);
    const int endowment = kMaxEndowment / 4 + home->random_int(0, kMaxEndowment * 3 / 4);
    const int metabolism = kMaxMetabolism / 3 + home->random_int(0, kMaxMetabolism * 2 / 3);
    const int max_children = home->random_int(2, kMaxChildren);
    const int grid_cells = grid.size * grid.size;
    Agent* agent = nullptr;
    if (r < kProbMale) {
      agent = new (heap) Male(home, vision, 0, max_age, endowment, metabolism, grid_cells);
    } else if (r < kProbMale + kProbFemale) {
      agent = new (heap) Female(home, vision, 0, max_age, endowment, metabolism, max_children, grid_cells);
    }
    if (agent != nullptr) home->enter(agent);
  }
};

}  // namespace dynasoar_sugarscape

namespace {

using dynasoar_sugarscape::Agent;
using dynasoar_sugarscape::Cell;
using dynasoar_sugarscape::Female;
using dynasoar_sugarscape::Male;
using dynasoar_sugarscape::View;

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli(
      "DynaSOAr's sugarscape (example/sugarscape/dynasoar: its rules, constants and random numbers) written with "
      "soaheap's native API, to compare with that program through the DynaSOAr shim; --size is the grid's side",
      soaheap_app::AppDefaults{64, 1700, 50, 10000});
  std::uint64_t heap_objects = soaheap_app::kDynasoarObjects;
  soaheap_app::add_heap_objects_option(cli, heap_objects);
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  const std::uint64_t cell_count = options.size * options.size;
  if (options.size > 46340) throw soaheap::usage_error("--size " + std::to_string(options.size) + ": the grid's cells must fit in an int");

  soaheap::HeapOptions heap_options;
  heap_options.objects = heap_objects;
  heap_options.backend = options.backend;
  dynasoar_sugarscape::SugarscapeHeap heap(heap_options);
  soaheap_app::AppRun<dynasoar_sugarscape::SugarscapeHeap> run("dynasoar_sugarscape", options, heap);

  soaheap::detail::Memory cells(heap.backend(), cell_count * sizeof(Cell*));
  const dynasoar_sugarscape::Grid grid{static_cast<int>(options.size), cells.as<Cell*>()};
  heap.launch(cell_count, dynasoar_sugarscape::CreateCells{heap.view(), grid});
  heap.launch(cell_count, dynasoar_sugarscape::CreateAgents{heap.view(), grid});

  const soaheap_app::IterationClock clock(heap);
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    heap.parallel_do<Cell, &Cell::grow_sugar>();
    heap.parallel_do<Cell, &Cell::prepare_diffuse>();
    heap.parallel_do<Cell, &Cell::update_diffuse>(grid);

    heap.parallel_do<Agent, &Agent::age_and_metabolize<View>>(heap.view());
    heap.parallel_do<Agent, &Agent::prepare_move>(grid);
    heap.parallel_do<Cell, &Cell::decide_permission>(grid);
    heap.parallel_do<Agent, &Agent::update_move>();

    heap.parallel_do<Male, &Male::propose<View>>(heap.view(), grid);
    heap.parallel_do<Female, &Female::decide_proposal<View>>(heap.view(), grid);
    heap.parallel_do<Male, &Male::propose_offspring_target>(grid);
    heap.parallel_do<Cell, &Cell::decide_permission>(grid);
    heap.parallel_do<Male, &Male::mate<View>>(heap.view(), grid);
    run.after_iteration(iteration);
  }
  const double iterations_seconds = clock.seconds();
  run.stop_clock();

  soaheap::detail::Memory counts(heap.backend(), 5 * sizeof(std::uint64_t));
  counts.fill_zero();
  heap.parallel_do<Agent, &Agent::check>(counts.as<std::uint64_t>());
  heap.parallel_do<Cell, &Cell::check<View>>(heap.view(), counts.as<std::uint64_t>());
  std::uint64_t host_counts[5] = {};
  heap.synchronize();
  counts.copy_to_host(host_counts, 0, sizeof(host_counts));
  heap.validate(soaheap::Validation::structure);
  const bool passed = host_counts[1] == 0 && host_counts[3] == 0 && host_counts[0] == host_counts[2] &&
                      heap.count<Agent>() == host_counts[0];
  soaheap_app::Result extra;
  extra["iterations_time_s"] = iterations_seconds;
  extra["cells"] = cell_count;
  extra["agents"] = host_counts[0];
  extra["males"] = heap.count<Male>();
  extra["females"] = heap.count<Female>();
  extra["misplaced_agents"] = host_counts[1] + host_counts[3];
  extra["checksum"] = host_counts[4];
  return run.finish(passed, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("dynasoar_sugarscape", [&] { return run_app(argc, argv); });
}
