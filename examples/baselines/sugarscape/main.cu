// Sugarscape baseline: the rules of examples/sugarscape (examples/applications/sugarscape/rules.cuh: same
// landscape, traits, counter-based priorities and two-phase conflict resolution) written by hand
// on fixed per-cell SOA arrays with no allocator: an agent is the agent fields of the cell it
// stands on ("classes merged with the cell", as the DynaSOAr paper's baselines do), and cells are
// addressed by index, so neighbours are index arithmetic instead of pointers. Kernels run through
// the same executor as the heap (CUDA grid or host thread pool). Prints the same JSON fields as
// sugarscape and compares the final grid with the sequential reference cell by cell.

#include "examples/common/baseline.cuh"
#include "examples/common/cell_arrays.cuh"
#include "examples/applications/sugarscape/rules.cuh"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/core/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sugarscape_baseline {

using namespace sugarscape;

constexpr std::uint64_t kNoAgent = ~std::uint64_t{0};  ///< agent id of an empty cell
constexpr std::uint32_t kNone = ~std::uint32_t{0};     ///< no target / no partner this step

/// One array per field; index = y * side + x. Sugar and capacity fit a byte (capacity is 0..4),
/// as do the age (< max_age <= 100) and the small traits.
struct Grid {
  std::uint8_t* sugar;
  std::uint8_t* capacity;
  std::uint64_t* move_reservation;
  std::uint64_t* birth_reservation;
  std::uint64_t* mate_request;  ///< of the agent on the cell: highest priority of a mother that chose it
  std::uint32_t* target;        ///< move target, then birth cell of this step; kNone: no agent acts here
  std::uint32_t* partner;       ///< father chosen this step; kNone: no birth from this cell
  // The agent merged into the cell.
  std::uint64_t* agent_id;  ///< kNoAgent for an empty cell
  std::int32_t* wealth;
  std::uint8_t* metabolism;
  std::uint8_t* vision;
  std::uint8_t* age;
  std::uint8_t* max_age;
  std::uint8_t* female;

  /// Puts a new agent with the traits of @p id on @p cell.
  SOAHEAP_HD void place_agent(std::uint32_t cell, std::uint64_t id, int new_wealth, const World& world) const {
    const Traits traits = world.traits(id);
    agent_id[cell] = id;
    wealth[cell] = new_wealth;
    metabolism[cell] = static_cast<std::uint8_t>(traits.metabolism);
    vision[cell] = static_cast<std::uint8_t>(traits.vision);
    age[cell] = 0;
    max_age[cell] = static_cast<std::uint8_t>(traits.max_age);
    female[cell] = static_cast<std::uint8_t>(traits.female);
  }
};

/// One step from (x, y) in @p direction on the torus, as World::neighbour.
SOAHEAP_HD inline void walk(std::uint32_t& x, std::uint32_t& y, int direction, std::uint32_t side) {
  switch (direction) {
    case 0: y = y == 0 ? side - 1 : y - 1; break;
    case 1: x = x + 1 == side ? 0 : x + 1; break;
    case 2: y = y + 1 == side ? 0 : y + 1; break;
    default: x = x == 0 ? side - 1 : x - 1; break;
  }
}

struct Initialize {
  Grid g;
  World world;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t c = static_cast<std::uint32_t>(index);
    g.capacity[c] = static_cast<std::uint8_t>(world.capacity(c));
    g.sugar[c] = g.capacity[c];
    g.agent_id[c] = kNoAgent;
    if (world.initially_occupied(c)) g.place_agent(c, c, world.traits(c).endowment, world);
  }
};

/// Sugar regrows; this step's reservations start empty.
struct Regrow {
  Grid g;
  int regrowth;
  SOAHEAP_HD void operator()(std::uint64_t c) const {
    const int grown = g.sugar[c] + regrowth, capacity = g.capacity[c];
    g.sugar[c] = static_cast<std::uint8_t>(grown < capacity ? grown : capacity);
    g.move_reservation[c] = 0;
    g.birth_reservation[c] = 0;
    g.mate_request[c] = 0;
  }
};

/// The agent on the cell picks the richest free cell within vision along the four lattice
/// directions (or stays) and reserves it.
struct RequestMove {
  Grid g;
  World world;
  std::uint64_t iteration;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t c = static_cast<std::uint32_t>(index);
    if (g.agent_id[c] == kNoAgent) {
      g.target[c] = kNone;
      return;
    }
    const std::uint32_t side = world.side;
    const int vision = g.vision[c];
    std::uint32_t best = c;
    int best_sugar = g.sugar[c], best_distance = 0;
    std::uint64_t best_tie = hash4(world.seed, kSaltTie, iteration, c);
    for (int d = 0; d < kDirections; ++d) {
      std::uint32_t x = c % side, y = c / side;
      for (int distance = 1; distance <= vision; ++distance) {
        walk(x, y, d, side);
        const std::uint32_t look = y * side + x;
        if (look == c || g.agent_id[look] != kNoAgent) continue;
        const std::uint64_t tie = hash4(world.seed, kSaltTie, iteration, look);
        if (world.better(g.sugar[look], distance, tie, best_sugar, best_distance, best_tie)) {
          best = look;
          best_sugar = g.sugar[look];
          best_distance = distance;
          best_tie = tie;
        }
      }
    }
    g.target[c] = best;
    if (best != c) atomic_max(&g.move_reservation[best], world.priority(kSaltMovePriority, iteration, c));
  }
};

/// The agent that stood on the cell at the start of the step moves if it won its target, then
/// eats, metabolizes, ages and maybe dies. Only the winner writes a target cell, which was empty
/// (its own thread does nothing: its target is kNone), and only the agent writes its own cell.
struct MoveAndEat {
  Grid g;
  World world;
  std::uint64_t iteration;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t c = static_cast<std::uint32_t>(index);
    const std::uint32_t wanted = g.target[c];
    if (wanted == kNone) return;
    std::uint32_t at = c;
    if (wanted != c && soaheap::detail::atomic_load(&g.move_reservation[wanted]) ==
                           world.priority(kSaltMovePriority, iteration, c))
      at = wanted;
    const int wealth = g.wealth[c] + g.sugar[at] - g.metabolism[c];
    g.sugar[at] = 0;
    const int age = g.age[c] + 1;
    if (wealth <= 0 || age >= g.max_age[c]) {
      g.agent_id[c] = kNoAgent;
      return;
    }
    if (at != c) {
      g.agent_id[at] = g.agent_id[c];
      g.metabolism[at] = g.metabolism[c];
      g.vision[at] = g.vision[c];
      g.max_age[at] = g.max_age[c];
      g.female[at] = g.female[c];
      g.agent_id[c] = kNoAgent;
    }
    g.wealth[at] = wealth;
    g.age[at] = static_cast<std::uint8_t>(age);
  }
};

/// A fertile female picks a fertile male neighbour and a free neighbouring birth cell.
struct RequestMate {
  Grid g;
  World world;
  std::uint64_t iteration;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t c = static_cast<std::uint32_t>(index);
    g.partner[c] = kNone;
    if (g.agent_id[c] == kNoAgent || g.female[c] == 0 || !world.fertile(g.age[c], g.wealth[c])) return;
    std::uint32_t father = kNone, birth = kNone;
    const int first = static_cast<int>(hash4(world.seed, kSaltBirthDirection, iteration, c) % kDirections);
    for (int k = 0; k < kDirections; ++k) {
      std::uint32_t x = c % world.side, y = c / world.side;
      walk(x, y, (first + k) % kDirections, world.side);
      const std::uint32_t next = y * world.side + x;
      if (g.agent_id[next] == kNoAgent) {
        if (birth == kNone) birth = next;
      } else if (father == kNone && g.female[next] == 0 && world.fertile(g.age[next], g.wealth[next])) {
        father = next;
      }
    }
    if (father == kNone || birth == kNone) return;
    const std::uint64_t key = world.priority(kSaltMatePriority, iteration, c);
    g.partner[c] = father;
    g.target[c] = birth;
    atomic_max(&g.mate_request[father], key);
    atomic_max(&g.birth_reservation[birth], key);
  }
};

/// If both the father and the birth cell were won, the child gets half of each parent's wealth.
/// The father and the birth cell are written only by their winner; the father (male) and the birth
/// cell (empty at the request) have no partner, so their own threads do nothing.
struct GiveBirth {
  Grid g;
  World world;
  std::uint64_t iteration;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t c = static_cast<std::uint32_t>(index);
    const std::uint32_t father = g.partner[c];
    if (father == kNone) return;
    const std::uint32_t birth = g.target[c];
    const std::uint64_t key = world.priority(kSaltMatePriority, iteration, c);
    if (soaheap::detail::atomic_load(&g.mate_request[father]) != key ||
        soaheap::detail::atomic_load(&g.birth_reservation[birth]) != key)
      return;
    const int from_mother = g.wealth[c] / 2, from_father = g.wealth[father] / 2;
    g.place_agent(birth, world.child_id(iteration, birth), from_mother + from_father, world);
    g.wealth[c] -= from_mother;
    g.wealth[father] -= from_father;
  }
};

/// The model on per-cell arrays in the backend's memory.
class Simulation {
 public:
  Simulation(const soaheap::detail::Executor& executor, const World& world)
      : executor_(executor), world_(world), cells_(world.cell_count()), arrays_(executor.backend, cells_) {
    grid_ = Grid{arrays_.add<std::uint8_t>(),  arrays_.add<std::uint8_t>(),  arrays_.add<std::uint64_t>(),
                 arrays_.add<std::uint64_t>(), arrays_.add<std::uint64_t>(), arrays_.add<std::uint32_t>(),
                 arrays_.add<std::uint32_t>(), arrays_.add<std::uint64_t>(), arrays_.add<std::int32_t>(),
                 arrays_.add<std::uint8_t>(),  arrays_.add<std::uint8_t>(),  arrays_.add<std::uint8_t>(),
                 arrays_.add<std::uint8_t>(),  arrays_.add<std::uint8_t>()};
    executor_.launch(cells_, Initialize{grid_, world_});
  }

  /// Launches the kernels of one step (asynchronously on cuda).
  void step(std::uint64_t iteration) const {
    executor_.launch(cells_, Regrow{grid_, world_.regrowth});
    executor_.launch(cells_, RequestMove{grid_, world_, iteration});
    executor_.launch(cells_, MoveAndEat{grid_, world_, iteration});
    executor_.launch(cells_, RequestMate{grid_, world_, iteration});
    executor_.launch(cells_, GiveBirth{grid_, world_, iteration});
  }

  std::uint64_t memory_bytes() const { return arrays_.bytes(); }

  /// Copies the state back (waits for the launched steps).
  void read(std::vector<int>& sugar, std::vector<std::optional<Reference::Person>>& agents) const {
    executor_.synchronize();
    const std::vector<std::uint8_t> sugar_bytes = arrays_.to_host(grid_.sugar);
    const std::vector<std::uint8_t> metabolism = arrays_.to_host(grid_.metabolism), vision = arrays_.to_host(grid_.vision);
    const std::vector<std::uint8_t> age = arrays_.to_host(grid_.age), max_age = arrays_.to_host(grid_.max_age);
    const std::vector<std::uint8_t> female = arrays_.to_host(grid_.female);
    const std::vector<std::uint64_t> ids = arrays_.to_host(grid_.agent_id);
    const std::vector<std::int32_t> wealth = arrays_.to_host(grid_.wealth);
    sugar.assign(sugar_bytes.begin(), sugar_bytes.end());
    agents.assign(cells_, std::nullopt);
    for (std::uint32_t c = 0; c < cells_; ++c) {
      if (ids[c] == kNoAgent) continue;
      agents[c] = Reference::Person{ids[c], wealth[c], metabolism[c], vision[c], age[c], max_age[c], female[c]};
    }
  }

 private:
  const soaheap::detail::Executor& executor_;
  World world_;
  std::uint64_t cells_;
  soaheap_app::CellArrays arrays_;
  Grid grid_{};
};

}  // namespace sugarscape_baseline

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::AppOptions options;
  sugarscape::World world;
  if (const auto exit_code = soaheap_app::parse_with_model(
          argc, argv,
          "Sugarscape baseline: the sugarscape rules on fixed per-cell arrays, without an allocator. --size is "
          "the side of the grid",
          sugarscape::kRunDefaults, sugarscape::world_of, options, world))
    return *exit_code;
  using sugarscape_baseline::Simulation;
  const auto read = [](const Simulation& simulation) {
    std::vector<int> sugar;
    std::vector<std::optional<sugarscape::Reference::Person>> agents;
    simulation.read(sugar, agents);
    return std::make_pair(sugar, agents);
  };
  return soaheap_app::run_baseline<Simulation>(
      "sugarscape_baseline", options, world, sugarscape::side_run_of(world),
      [&](const sugarscape::World& checked_world, const Simulation& checked) {
        const auto [sugar, agents] = read(checked);
        return soaheap_app::reference_after<sugarscape::Reference>(options.iterations, checked_world).compare(sugar, agents);
      },
      [&](const Simulation& simulation, soaheap_app::BaselineResult& result) {
        std::uint64_t agents = 0;
        for (const auto& agent : read(simulation).second) agents += agent.has_value() ? 1 : 0;
        result.objects = {{"Cell", world.cell_count()}, {"Agent", agents}};
        result.extra["grid"] = {world.side, world.side};
        result.extra["agents"] = agents;
      });
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("sugarscape_baseline", [&] { return run_app(argc, argv); });
}
