#pragma once
// The Wa-Tor rules shared by examples/applications/wa_tor (objects on a soaheap heap) and
// examples/baselines/wa_tor (fixed arrays): parameters, counter-based random numbers, the
// deterministic move-request keys, the initial state, and the sequential host reference that
// both self-checks compare against cell by cell.

#include "examples/common/counter_hash.cuh"
#include "examples/common/requests.cuh"
#include "examples/common/torus.cuh"
#include "examples/harness/harness.hpp"

#include <soaheap/base/portability.cuh>

#include <cstdint>
#include <utility>
#include <vector>

namespace wator {
// ---- model parameters -----------------------------------------------------------------------------
struct Rules {
  std::uint32_t fish_breed_time = 3;    ///< steps (moves) a fish needs before it leaves offspring behind
  std::uint32_t shark_breed_time = 10;  ///< the same for sharks
  std::uint32_t shark_starve_time = 4;  ///< steps without food after which a shark dies
  std::uint32_t initial_fish_per_mille = 300;
  std::uint32_t initial_shark_per_mille = 30;
};

/// The rules' command-line options, shared by the application and its baseline.
inline void add_options(soaheap_app::Cli& cli, Rules& rules) {
  cli.option("--fish-breed", rules.fish_breed_time, "Steps a fish needs to breed");
  cli.option("--shark-breed", rules.shark_breed_time, "Steps a shark needs to breed");
  cli.option("--shark-starve", rules.shark_starve_time, "Steps without food after which a shark dies");
}

constexpr int kDirections = 4;  // north, east, south, west
constexpr std::uint32_t kSaltInitial = 1, kSaltFishChoice = 2, kSaltFishPriority = 3, kSaltSharkChoice = 4,
                        kSaltSharkPriority = 5;

/// Counter-based random numbers: the same (seed, iteration, salt, cell) gives the same value on
/// every backend and in the host reference.
SOAHEAP_HD inline std::uint64_t hash4(std::uint64_t seed, std::uint64_t iteration, std::uint64_t salt,
                                      std::uint64_t cell) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ULL ^ (iteration + 1) * 0xbf58476d1ce4e5b9ULL ^
                    salt * 0x94d049bb133111ebULL ^ (cell + 1) * 0xd6e8feb86659fd93ULL;
  return soaheap_app::splitmix64_finalise(x);
}

/// A move request: higher wins; the low 32 bits name the requesting cell (ties impossible).
SOAHEAP_HD inline std::uint64_t request_key(std::uint64_t seed, std::uint64_t iteration, std::uint64_t salt,
                                            std::uint32_t cell) {
  return soaheap_app::request_key(hash4(seed, iteration, salt, cell), cell);
}

using soaheap_app::atomic_max;

enum : std::uint8_t { kEmpty = 0, kFish = 1, kShark = 2 };

SOAHEAP_HD inline std::uint8_t initial_kind(std::uint64_t seed, std::uint64_t cell, const Rules& rules) {
  const std::uint64_t roll = hash4(seed, 0, kSaltInitial, cell) % 1000;
  if (roll < rules.initial_shark_per_mille) return kShark;
  if (roll < rules.initial_shark_per_mille + rules.initial_fish_per_mille) return kFish;
  return kEmpty;
}


/// The move rule: the direction (0..3, see soaheap_app::torus_neighbour) an agent of kind @p mover
/// in cell @p me requests, or -1 when it cannot move. A shark prefers neighbours with a fish, any
/// agent takes a free neighbour otherwise; among the candidates, in direction order, the hash of
/// (seed, iteration, me) chooses. @p kind_of(d) is the kind of neighbour d's occupant. Shared by
/// the heap versions (wa_tor, wa_tor_slabs) and the reference below.
template <class KindOf>
SOAHEAP_HD int choose_direction(std::uint8_t mover, std::uint64_t seed, std::uint64_t iteration, std::uint32_t me,
                                const KindOf& kind_of) {
  int preferred[kDirections], free_directions[kDirections];
  int preferred_count = 0, free_count = 0;
  for (int d = 0; d < kDirections; ++d) {
    const std::uint8_t kind = kind_of(d);
    if (kind == kEmpty) free_directions[free_count++] = d;
    else if (mover == kShark && kind == kFish) preferred[preferred_count++] = d;
  }
  const int* options = preferred_count > 0 ? preferred : free_directions;
  const int count = preferred_count > 0 ? preferred_count : free_count;
  if (count == 0) return -1;
  const std::uint64_t salt = mover == kFish ? kSaltFishChoice : kSaltSharkChoice;
  return options[hash4(seed, iteration, salt, me) % static_cast<std::uint64_t>(count)];
}

/// The priority of that request (higher wins).
SOAHEAP_HD inline std::uint64_t move_priority(std::uint8_t mover, std::uint64_t seed, std::uint64_t iteration,
                                              std::uint32_t me) {
  return request_key(seed, iteration, mover == kFish ? kSaltFishPriority : kSaltSharkPriority, me);
}

/// @brief The move request of @p agent (an Agent of wa_tor or of its multi-rank port, on cells of
///        type Cell): its target becomes the neighbour the move rule chooses, whose request it
///        raises to the agent's priority, or nullptr when the agent stays.
template <class Cell, class Agent, class KindOf>
SOAHEAP_HD void post_move_request(Agent& agent, std::uint8_t mover, std::uint64_t seed, std::uint64_t iteration,
                                  const KindOf& kind_of) {
  Cell* here = agent.position;
  const std::uint32_t me = agent.location;
  const int direction = choose_direction(mover, seed, iteration, me, kind_of);
  if (direction < 0) {
    agent.target = nullptr;
    return;
  }
  Cell* chosen = here->neighbours[direction];
  agent.target = chosen;
  atomic_max(chosen->request_address(), move_priority(mover, seed, iteration, me));
}

/// @brief Whether @p agent's request for its target won: the target's request carries the winner's location.
template <class Cell, class Agent>
SOAHEAP_HD bool won_move_request(const Agent& agent) {
  Cell* wanted = agent.target;
  if (wanted == nullptr) return false;
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(wanted->request) & 0xffffffffULL) ==
         static_cast<std::uint32_t>(agent.location);
}

// ---- sequential host reference with the same rules ------------------------------------------------

struct ReferenceCell {
  std::uint8_t kind = kEmpty;
  std::uint32_t breed_age = 0;
  std::uint32_t hunger = 0;
};

class Reference {
 public:
  Reference(std::uint32_t width, std::uint32_t height, std::uint64_t seed, const Rules& rules)
      : width_(width), height_(height), seed_(seed), rules_(rules), cells_(std::size_t{width} * height) {
    for (std::size_t i = 0; i < cells_.size(); ++i) cells_[i].kind = initial_kind(seed, i, rules);
  }

  void step(std::uint64_t iteration) {
    phase(iteration, kFish);
    phase(iteration, kShark);
  }
  const std::vector<ReferenceCell>& cells() const { return cells_; }

 private:
  std::uint32_t neighbour(std::uint32_t i, int d) const { return soaheap_app::torus_neighbour(i, d, width_, height_); }

  void phase(std::uint64_t iteration, std::uint8_t kind) {
    const std::size_t n = cells_.size();
    std::vector<std::uint64_t> request(n, 0);
    std::vector<std::int64_t> target(n, -1);
    for (std::uint32_t i = 0; i < n; ++i) {
      if (cells_[i].kind != kind) continue;
      const int direction =
          choose_direction(kind, seed_, iteration, i, [&](int d) { return cells_[neighbour(i, d)].kind; });
      if (direction < 0) continue;
      const std::uint32_t chosen = neighbour(i, direction);
      target[i] = chosen;
      const std::uint64_t key = move_priority(kind, seed_, iteration, i);
      if (key > request[chosen]) request[chosen] = key;
    }
    std::vector<ReferenceCell> next = cells_;
    for (std::uint32_t i = 0; i < n; ++i) {
      if (cells_[i].kind != kind) continue;
      ReferenceCell agent = cells_[i];
      agent.breed_age += 1;
      std::uint32_t at = i;
      bool ate = false;
      const bool won = target[i] >= 0 && (request[static_cast<std::size_t>(target[i])] & 0xffffffffULL) == i;
      if (won) {
        const std::uint32_t to = static_cast<std::uint32_t>(target[i]);
        ate = cells_[to].kind == kFish;
        const std::uint32_t breed_time = kind == kFish ? rules_.fish_breed_time : rules_.shark_breed_time;
        if (agent.breed_age >= breed_time) {
          agent.breed_age = 0;
          next[i] = ReferenceCell{kind, 0, 0};
        } else {
          next[i] = ReferenceCell{};
        }
        at = to;
      }
      if (kind == kShark) {
        if (ate) {
          agent.hunger = 0;
        } else if (++agent.hunger >= rules_.shark_starve_time) {
          next[at] = ReferenceCell{};
          continue;
        }
      }
      next[at] = agent;
    }
    cells_ = std::move(next);
  }

  std::uint32_t width_, height_;
  std::uint64_t seed_;
  Rules rules_;
  std::vector<ReferenceCell> cells_;
};

}  // namespace wator
