// Sugarscape (Epstein & Axtell), the simple variant of the DynaSOAr paper (Section 6, category 3):
// a torus grid of Cell objects holding regrowing sugar, and Agent objects with vision, metabolism
// and age that move to the richest visible cell, eat, age, mate (new Agent objects) and die
// (destroy). Conflicts (two agents wanting one cell, two mothers wanting one father or one birth
// cell) are resolved in two phases: requests post hashed priorities with atomic max, and only
// the winner acts in the next kernel, so results do not depend on thread order. A sequential
// host reference runs the same rules and is compared cell by cell.

#include "examples/common/app.cuh"
#include "examples/common/counter_hash.cuh"
#include "examples/common/reference_check.cuh"
#include "examples/common/requests.cuh"

#include <soaheap/soaheap.cuh>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sugarscape {

constexpr int kDirections = 4;
constexpr std::uint64_t kSaltInitial = 1, kSaltTraits = 2, kSaltMovePriority = 3, kSaltTie = 4, kSaltMatePriority = 5,
                        kSaltBirthDirection = 6;

using soaheap_app::hash4;

/// Genetic and initial traits of an agent, a pure function of its id.
struct Traits {
  int vision, metabolism, max_age, female, endowment;
};

/// Model parameters and the landscape; pure functions shared by device code and the reference.
struct World {
  std::uint32_t side = 0;
  std::uint64_t seed = 0;
  int initial_per_mille = 150;
  int regrowth = 1;
  int fertile_from = 12, fertile_until = 50, mating_wealth = 10;

  SOAHEAP_HD std::uint32_t cell_count() const { return side * side; }
  SOAHEAP_HD std::uint32_t neighbour(std::uint32_t cell, int direction) const {
    const std::uint32_t x = cell % side, y = cell / side;
    switch (direction) {
      case 0: return ((y + side - 1) % side) * side + x;
      case 1: return y * side + (x + 1) % side;
      case 2: return ((y + 1) % side) * side + x;
      default: return y * side + (x + side - 1) % side;
    }
  }
  /// Sugar capacity 0..4: two sugar mountains at (1/4, 1/4) and (3/4, 3/4) of the grid.
  SOAHEAP_HD int capacity(std::uint32_t cell) const {
    const int x = static_cast<int>(cell % side), y = static_cast<int>(cell / side);
    const int s = static_cast<int>(side);
    const int d1 = (x - s / 4) * (x - s / 4) + (y - s / 4) * (y - s / 4);
    const int d2 = (x - 3 * s / 4) * (x - 3 * s / 4) + (y - 3 * s / 4) * (y - 3 * s / 4);
    const int d = d1 < d2 ? d1 : d2;
    const int r = s / 16 > 0 ? s / 16 : 1;
    const int level = 4 - d / (r * r * 4);
    return level > 0 ? level : 0;
  }
  SOAHEAP_HD bool initially_occupied(std::uint32_t cell) const {
    return hash4(seed, kSaltInitial, cell, 0) % 1000 < static_cast<std::uint64_t>(initial_per_mille);
  }
  SOAHEAP_HD Traits traits(std::uint64_t id) const {
    const std::uint64_t h = hash4(seed, kSaltTraits, id, 0);
    Traits t;
    t.vision = 1 + static_cast<int>(h % 6);
    t.metabolism = 1 + static_cast<int>((h >> 8) % 4);
    t.max_age = 60 + static_cast<int>((h >> 16) % 41);
    t.female = static_cast<int>((h >> 24) & 1);
    t.endowment = 5 + static_cast<int>((h >> 32) % 21);
    return t;
  }
  SOAHEAP_HD std::uint64_t child_id(std::uint64_t iteration, std::uint32_t cell) const {
    return (iteration + 1) * cell_count() + cell;
  }
  /// Priorities: the low 32 bits (the requester's cell) make keys unique; 0 means "no request".
  SOAHEAP_HD std::uint64_t priority(std::uint64_t salt, std::uint64_t iteration, std::uint32_t cell) const {
    return soaheap_app::request_key(hash4(seed, salt, iteration, cell), cell);
  }
  /// Better target: more sugar, then nearer, then the smaller tie-break hash.
  SOAHEAP_HD bool better(int sugar, int distance, std::uint64_t tie, int best_sugar, int best_distance,
                         std::uint64_t best_tie) const {
    if (sugar != best_sugar) return sugar > best_sugar;
    if (distance != best_distance) return distance < best_distance;
    return tie < best_tie;
  }
  SOAHEAP_HD bool fertile(int age, int wealth) const {
    return age >= fertile_from && age <= fertile_until && wealth >= mating_wealth;
  }
};

using soaheap_app::atomic_max;

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
    Agent* child = new (heap) Agent(birth, world.child_id(iteration, birth->id), from_mother + from_father, world);
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

  void setup(SugarHeap& heap) const {
    soaheap::detail::Memory cells(heap.backend(), world_.cell_count() * sizeof(Cell*));
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

/// The same rules, sequentially, on arrays indexed by cell.
class Reference {
 public:
  struct Person {
    std::uint64_t id;
    int wealth, metabolism, vision, age, max_age, female;
  };

  explicit Reference(const World& world)
      : world_(world), sugar_(world.cell_count()), capacity_(world.cell_count()), agents_(world.cell_count()) {
    for (std::uint32_t c = 0; c < world.cell_count(); ++c) {
      capacity_[c] = sugar_[c] = world.capacity(c);
      if (world.initially_occupied(c)) agents_[c] = make(c, world.traits(c).endowment);
    }
  }

  Person make(std::uint64_t id, int wealth) const {
    const Traits t = world_.traits(id);
    return Person{id, wealth, t.metabolism, t.vision, 0, t.max_age, t.female};
  }

  void step(std::uint64_t iteration) {
    const std::uint32_t n = world_.cell_count();
    for (std::uint32_t c = 0; c < n; ++c) sugar_[c] = std::min(sugar_[c] + world_.regrowth, capacity_[c]);
    std::vector<std::uint64_t> reservation(n, 0);
    std::vector<std::uint32_t> target(n, 0);
    for (std::uint32_t c = 0; c < n; ++c) {
      if (!agents_[c]) continue;
      std::uint32_t best = c;
      int best_sugar = sugar_[c], best_distance = 0;
      std::uint64_t best_tie = hash4(world_.seed, kSaltTie, iteration, c);
      for (int d = 0; d < kDirections; ++d) {
        std::uint32_t look = c;
        for (int distance = 1; distance <= agents_[c]->vision; ++distance) {
          look = world_.neighbour(look, d);
          if (look == c || agents_[look]) continue;
          const std::uint64_t tie = hash4(world_.seed, kSaltTie, iteration, look);
          if (world_.better(sugar_[look], distance, tie, best_sugar, best_distance, best_tie)) {
            best = look;
            best_sugar = sugar_[look];
            best_distance = distance;
            best_tie = tie;
          }
        }
      }
      target[c] = best;
      if (best != c) reservation[best] = std::max(reservation[best], world_.priority(kSaltMovePriority, iteration, c));
    }
    std::vector<std::optional<Person>> moved(n);
    for (std::uint32_t c = 0; c < n; ++c) {
      if (!agents_[c]) continue;
      std::uint32_t at = c;
      if (target[c] != c && reservation[target[c]] == world_.priority(kSaltMovePriority, iteration, c)) at = target[c];
      Person p = *agents_[c];
      p.wealth += sugar_[at] - p.metabolism;
      sugar_[at] = 0;
      p.age += 1;
      if (p.wealth <= 0 || p.age >= p.max_age) continue;
      moved[at] = p;
    }
    agents_ = std::move(moved);
    std::vector<std::uint64_t> mate_request(n, 0), birth_reservation(n, 0);
    std::vector<std::int64_t> father_of(n, -1), birth_of(n, -1);
    for (std::uint32_t c = 0; c < n; ++c) {
      if (!agents_[c] || agents_[c]->female == 0 || !world_.fertile(agents_[c]->age, agents_[c]->wealth)) continue;
      std::int64_t father = -1, birth = -1;
      const int first = static_cast<int>(hash4(world_.seed, kSaltBirthDirection, iteration, c) % kDirections);
      for (int k = 0; k < kDirections; ++k) {
        const std::uint32_t next = world_.neighbour(c, (first + k) % kDirections);
        if (!agents_[next]) {
          if (birth < 0) birth = next;
        } else if (father < 0 && agents_[next]->female == 0 && world_.fertile(agents_[next]->age, agents_[next]->wealth)) {
          father = next;
        }
      }
      if (father < 0 || birth < 0) continue;
      const std::uint64_t key = world_.priority(kSaltMatePriority, iteration, c);
      father_of[c] = father;
      birth_of[c] = birth;
      mate_request[father] = std::max(mate_request[father], key);
      birth_reservation[birth] = std::max(birth_reservation[birth], key);
    }
    // Wealth is read before any birth of this step changes it, as on the heap where each parent
    // is changed by exactly one thread.
    std::vector<std::pair<std::uint32_t, Person>> children;
    for (std::uint32_t c = 0; c < n; ++c) {
      if (father_of[c] < 0) continue;
      const auto father = static_cast<std::uint32_t>(father_of[c]);
      const auto birth = static_cast<std::uint32_t>(birth_of[c]);
      const std::uint64_t key = world_.priority(kSaltMatePriority, iteration, c);
      if (mate_request[father] != key || birth_reservation[birth] != key) continue;
      const int from_mother = agents_[c]->wealth / 2, from_father = agents_[father]->wealth / 2;
      agents_[c]->wealth -= from_mother;
      agents_[father]->wealth -= from_father;
      children.emplace_back(birth, make(world_.child_id(iteration, birth), from_mother + from_father));
    }
    for (const auto& [cell, child] : children) agents_[cell] = child;
  }

  std::uint64_t compare(const SugarHeap& heap) const {
    std::uint64_t mismatches = 0;
    std::vector<int> sugar(world_.cell_count(), -1);
    heap.for_each<Cell>([&](const Cell* cell) { sugar[cell->id] = cell->sugar; });
    std::vector<std::optional<Person>> seen(world_.cell_count());
    heap.for_each<Agent>([&](const Agent* agent) {
      const std::uint32_t c = agent->cell_id;
      if (c >= seen.size() || seen[c]) {
        ++mismatches;
        return;
      }
      seen[c] = Person{agent->id, agent->wealth, agent->metabolism, agent->vision, agent->age, agent->max_age, agent->female};
    });
    for (std::uint32_t c = 0; c < world_.cell_count(); ++c) {
      if (sugar[c] != sugar_[c]) ++mismatches;
      const auto& a = seen[c];
      const auto& b = agents_[c];
      if (a.has_value() != b.has_value() || (a && (a->id != b->id || a->wealth != b->wealth || a->age != b->age)))
        ++mismatches;
    }
    return mismatches;
  }

 private:
  World world_;
  std::vector<int> sugar_, capacity_;
  std::vector<std::optional<Person>> agents_;
};

constexpr std::uint32_t kReferenceMaxSide = 128;

}  // namespace sugarscape

namespace {

int run_app(int argc, char** argv) {
  CLI::App cli{"Sugarscape: agents on a torus grid of Cell objects consume sugar, age, mate (new Agent objects) and "
               "die (destroy). --size is the side of the grid"};
  soaheap_app::CommonOptions common(cli, soaheap_app::AppDefaults{64, 2048, 100, 500});
  sugarscape::World world;
  cli.add_option("--initial-density", world.initial_per_mille, "initially occupied cells per mille")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cli.add_option("--regrowth", world.regrowth, "sugar regrowth per step")->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  const soaheap_app::AppOptions options = common.finalize();
  world.side = static_cast<std::uint32_t>(options.size);
  world.seed = options.seed;

  sugarscape::SugarHeap heap(sugarscape::Simulation::heap_options(world, options.backend));
  soaheap_app::AppRun<sugarscape::SugarHeap> run("sugarscape", options, heap);
  std::optional<sugarscape::World> side_world;  // too large for the reference: check a smaller grid
  if (world.side > sugarscape::kReferenceMaxSide) {
    side_world = world;
    side_world->side = sugarscape::kReferenceMaxSide / 2;
  }
  const soaheap_app::ReferenceCheck check =
      soaheap_app::run_with_reference_check<sugarscape::Simulation, sugarscape::Reference>(options, run, heap, world,
                                                                                           side_world);
  const std::uint64_t agents = heap.count<sugarscape::Agent>();
  heap.validate(soaheap::Validation::structure);
  nlohmann::json extra;
  extra["grid"] = {world.side, world.side};
  extra["agents"] = agents;
  extra["simulation_time_s"] = check.simulation_seconds;
  extra["self_check_mismatches"] = check.mismatches;
  return run.finish(check.mismatches == 0, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("sugarscape", [&] { return run_app(argc, argv); });
}
