#pragma once
// The Sugarscape rules shared by examples/sugarscape (objects on a soaheap heap) and
// examples/sugarscape_baseline (per-cell arrays): parameters, the landscape, counter-based random
// numbers and priorities, agent traits, and the sequential host reference that both self-checks
// compare against cell by cell.

#include "examples/common/counter_hash.cuh"
#include "examples/common/model.cuh"
#include "examples/common/requests.cuh"
#include "examples/common/torus.cuh"
#include "examples/harness/harness.hpp"

#include <soaheap/base/portability.cuh>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
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
    return soaheap_app::torus_neighbour(cell, direction, side, side);
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

/// Reservations: one native 64-bit atomic max (not a CAS loop), so requests contend only in hardware.
using soaheap::detail::atomic_max;

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


  /// Cells whose sugar or occupant (id, wealth, age) differ from this reference.
  /// @param sugar the sugar of every cell
  /// @param agents the agent on every cell, if any
  std::uint64_t compare(const std::vector<int>& sugar, const std::vector<std::optional<Person>>& agents) const {
    std::uint64_t mismatches = 0;
    for (std::uint32_t c = 0; c < world_.cell_count(); ++c) {
      if (sugar[c] != sugar_[c]) ++mismatches;
      const auto& a = agents[c];
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

/// Largest grid side compared against the reference on the full run; larger runs check a side-run
/// of half this side with the same seed and iterations.
constexpr std::uint32_t kReferenceMaxSide = 128;

/// Grid side and iterations of a run without --size or --iterations (application and baseline alike).
inline constexpr soaheap_app::AppDefaults kRunDefaults{64, 2048, 100, 500};

/// The model's command-line options, shared by the application and its baseline.
inline void add_options(soaheap_app::Cli& cli, World& world) {
  cli.option("--initial-density", world.initial_per_mille, "initially occupied cells per mille", 0, 1000);
  cli.option("--regrowth", world.regrowth, "sugar regrowth per step");
}

/// The world of a run: --size is the side of the grid.
inline World world_of(const World& world, const soaheap_app::AppOptions& options) {
  return soaheap_app::sized_model<&World::side>(world, options);
}

/// The model the self-check simulates: @p world itself, or a smaller side-run when @p world is too
/// large for the sequential reference.
inline std::optional<World> side_run_of(const World& world) {
  return soaheap_app::side_run<&World::side>(world, kReferenceMaxSide, kReferenceMaxSide / 2);
}

}  // namespace sugarscape
