#pragma once
// The Nagel-Schreckenberg traffic rules shared by examples/traffic (objects on a soaheap heap) and
// examples/traffic_baseline (per-cell arrays): the procedural street network, counter-based random
// numbers and priorities, and the sequential host reference that both self-checks compare against
// cell by cell.

#include "examples/common/counter_hash.cuh"
#include "examples/common/model.cuh"
#include "examples/common/requests.cuh"

#include "examples/harness/harness.hpp"

#include <soaheap/base/portability.cuh>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace traffic {

constexpr int kMaxOutgoing = 2;
constexpr int kSourceStreetEvery = 4;  ///< every 4th street starts with a source cell
constexpr int kSinkStreetEvery = 8;    ///< every 8th street ends in a sink
constexpr std::uint64_t kSaltRoute = 1, kSaltSlowDown = 2, kSaltSpawn = 3, kSaltInitial = 4, kSaltSpeed = 5,
                        kSaltPriority = 6, kSaltStreetLink = 7;

using soaheap_app::hash4;
using soaheap_app::uniform;

/// Model parameters and the procedural network: a pure function of (streets, length, seed), so the
/// device build and the host reference agree without sharing memory.
struct Network {
  std::uint32_t streets = 0;
  std::uint32_t length = 0;  ///< cells per street
  std::uint64_t seed = 0;
  double initial_density = 0.2;
  double spawn_probability = 0.3;
  double slow_down_probability = 0.2;

  SOAHEAP_HD std::uint32_t cell_count() const { return streets * length; }
  SOAHEAP_HD bool is_source(std::uint32_t cell) const {
    return cell % length == 0 && (cell / length) % kSourceStreetEvery == 0;
  }
  SOAHEAP_HD int outgoing_count(std::uint32_t cell) const {
    if (cell % length != length - 1) return 1;
    return (cell / length) % kSinkStreetEvery == kSinkStreetEvery - 1 ? 0 : kMaxOutgoing;
  }
  SOAHEAP_HD std::uint32_t outgoing(std::uint32_t cell, int k) const {
    if (cell % length != length - 1) return cell + 1;
    const std::uint32_t street = cell / length;
    return static_cast<std::uint32_t>(hash4(seed, kSaltStreetLink, street, static_cast<std::uint64_t>(k)) % streets) *
           length;
  }
  /// Which outgoing link car @p car takes at @p cell: fixed per (car, cell), so the look-ahead of one
  /// step and the move of the next agree.
  SOAHEAP_HD int route(std::uint64_t car, std::uint32_t cell, int count) const {
    return count <= 1 ? 0 : static_cast<int>(hash4(seed, kSaltRoute, car, cell) % static_cast<std::uint64_t>(count));
  }
  SOAHEAP_HD int max_velocity(std::uint64_t car) const { return 3 + static_cast<int>(hash4(seed, kSaltSpeed, car, 0) % 3); }
  /// Priority of a car's reservations; the low 32 bits (its cell) make keys unique.
  SOAHEAP_HD std::uint64_t priority(std::uint64_t iteration, std::uint64_t car, std::uint32_t cell) const {
    return soaheap_app::request_key(hash4(seed, kSaltPriority, iteration, car), cell);
  }
  SOAHEAP_HD bool slows_down(std::uint64_t iteration, std::uint64_t car) const {
    return uniform(seed, kSaltSlowDown, iteration, car) < slow_down_probability;
  }
  SOAHEAP_HD bool spawns(std::uint64_t iteration, std::uint32_t cell) const {
    return uniform(seed, kSaltSpawn, iteration, cell) < spawn_probability;
  }
  SOAHEAP_HD bool initially_occupied(std::uint32_t cell) const {
    return outgoing_count(cell) > 0 && uniform(seed, kSaltInitial, cell, 0) < initial_density;
  }
  /// Unique car ids: initial cars are numbered by cell, spawned ones by (iteration, cell).
  SOAHEAP_HD std::uint64_t spawned_car_id(std::uint64_t iteration, std::uint32_t cell) const {
    return (iteration + 1) * cell_count() + cell;
  }
};

/// Reservations: one native 64-bit atomic max (not a CAS loop), so requests contend only in hardware.
using soaheap::detail::atomic_max;

/// The same rules, sequentially, on plain arrays indexed by cell.
class Reference {
 public:
  struct Vehicle {
    std::uint64_t id = 0;
    int velocity = 0;
    int max_velocity = 0;
  };

  explicit Reference(const Network& network) : network_(network), cars_(network.cell_count()) {
    for (std::uint32_t cell = 0; cell < network.cell_count(); ++cell)
      if (network.initially_occupied(cell)) cars_[cell] = Vehicle{cell, 0, network.max_velocity(cell)};
  }

  std::int64_t next_on_route(std::uint64_t car, std::uint32_t cell) const {
    const int count = network_.outgoing_count(cell);
    if (count == 0) return -1;
    return network_.outgoing(cell, network_.route(car, cell, count));
  }

  void step(std::uint64_t iteration) {
    const std::uint32_t cells = network_.cell_count();
    std::vector<std::uint64_t> reservation(cells, 0);
    for (std::uint32_t cell = 0; cell < cells; ++cell) {
      if (!cars_[cell]) continue;
      Vehicle& car = *cars_[cell];
      int speed = std::min(car.velocity + 1, car.max_velocity);
      int gap = 0;
      std::uint32_t at = cell;
      while (gap < speed) {
        const std::int64_t next = next_on_route(car.id, at);
        if (next < 0 || cars_[static_cast<std::size_t>(next)]) break;
        ++gap;
        at = static_cast<std::uint32_t>(next);
        if (network_.outgoing_count(at) == 0) break;
      }
      speed = std::min(speed, gap);
      if (speed > 0 && network_.slows_down(iteration, car.id)) --speed;
      car.velocity = speed;
      const std::uint64_t key = network_.priority(iteration, car.id, cell);
      at = cell;
      for (int s = 0; s < speed; ++s) {
        at = static_cast<std::uint32_t>(next_on_route(car.id, at));
        reservation[at] = std::max(reservation[at], key);
      }
    }
    std::vector<std::optional<Vehicle>> after(cells);
    for (std::uint32_t cell = 0; cell < cells; ++cell) {
      if (!cars_[cell]) continue;
      Vehicle car = *cars_[cell];
      const std::uint64_t key = network_.priority(iteration, car.id, cell);
      std::uint32_t at = cell;
      int moved = 0;
      for (int s = 0; s < car.velocity; ++s) {
        const auto next = static_cast<std::uint32_t>(next_on_route(car.id, at));
        if (reservation[next] != key) break;
        at = next;
        ++moved;
      }
      car.velocity = moved;
      if (network_.outgoing_count(at) == 0) continue;  // reached a sink: leaves the network
      after[at] = car;
    }
    for (std::uint32_t cell = 0; cell < cells; ++cell) {
      if (!network_.is_source(cell) || after[cell] || !network_.spawns(iteration, cell)) continue;
      const std::uint64_t id = network_.spawned_car_id(iteration, cell);
      after[cell] = Vehicle{id, 0, network_.max_velocity(id)};
    }
    cars_ = std::move(after);
  }

  /// Cells whose occupant (id, velocity) differs from this reference.
  /// @param cars the car on every cell, if any
  std::uint64_t compare(const std::vector<std::optional<Vehicle>>& cars) const {
    std::uint64_t mismatches = 0;
    for (std::uint32_t cell = 0; cell < network_.cell_count(); ++cell) {
      const auto& a = cars[cell];
      const auto& b = cars_[cell];
      if (a.has_value() != b.has_value() || (a && (a->id != b->id || a->velocity != b->velocity))) ++mismatches;
    }
    return mismatches;
  }

 private:
  Network network_;
  std::vector<std::optional<Vehicle>> cars_;
};

/// Most streets compared against the reference on the full run; larger runs check a side-run of a
/// quarter of this with the same seed and iterations.
constexpr std::uint32_t kReferenceMaxStreets = 256;

/// Streets and iterations of a run without --size or --iterations (application and baseline alike).
inline constexpr soaheap_app::AppDefaults kRunDefaults{256, 65536, 200, 1000};

/// The model's command-line options, shared by the application and its baseline.
inline void add_options(soaheap_app::Cli& cli, Network& network) {
  network.length = 64;
  cli.option("--street-length", network.length, "cells per street", 2, 1 << 16);
  cli.option("--density", network.initial_density, "initial share of occupied cells");
  cli.option("--spawn-probability", network.spawn_probability, "chance per step that a free source cell gets a car");
  cli.option("--slow-down", network.slow_down_probability, "NaSch random slow-down probability");
}

/// The network of a run: --size is the number of streets.
inline Network network_of(const Network& network, const soaheap_app::AppOptions& options) {
  return soaheap_app::sized_model<&Network::streets>(network, options);
}

/// The model the self-check simulates: @p network itself, or a smaller side-run when @p network is
/// too large for the sequential reference.
inline std::optional<Network> side_run_of(const Network& network) {
  return soaheap_app::side_run<&Network::streets>(network, kReferenceMaxStreets, kReferenceMaxStreets / 4);
}

}  // namespace traffic
