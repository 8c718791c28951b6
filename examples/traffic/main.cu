// Traffic: the Nagel–Schreckenberg cellular automaton on a street network (DynaSOAr paper,
// Section 6, category 3). Streets are chains of Cell objects; the last cell of a street is an
// intersection that links to the first cells of two other streets (merges happen there) or is a
// sink. Car objects are created at source cells and destroyed when they reach a sink.
//
// One iteration: every car accelerates, brakes to the free gap ahead along its route, randomly
// slows down, and reserves the cells it wants to drive through (atomic max of a hashed priority);
// then each car advances through the cells it won, up to the first one it lost. Both phases depend
// only on the state at the start of the step, so the result does not depend on thread order. A
// sequential host reference runs the same rules and is compared cell by cell.

#include "examples/common/app.cuh"
#include "examples/common/counter_hash.cuh"
#include "examples/common/reference_check.cuh"
#include "examples/common/requests.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>
#include <algorithm>
#include <optional>
#include <string>
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

using soaheap_app::atomic_max;

class Car;

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes = soaheap::fields<soaheap::array<Cell*, kMaxOutgoing>, Car*, std::uint64_t, std::uint32_t, int, int>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> outgoing;
  soaheap::Field<Cell, 1> car;          ///< occupant, or nullptr
  soaheap::Field<Cell, 2> reservation;  ///< highest priority of a car that wants to enter this step
  soaheap::Field<Cell, 3> id;
  soaheap::Field<Cell, 4> outgoing_count;
  soaheap::Field<Cell, 5> source;

  SOAHEAP_HD Cell(std::uint32_t new_id, const Network& network) {
    for (int k = 0; k < kMaxOutgoing; ++k) outgoing[k] = nullptr;
    car = nullptr;
    reservation = 0;
    id = new_id;
    outgoing_count = network.outgoing_count(new_id);
    source = network.is_source(new_id) ? 1 : 0;
  }

  SOAHEAP_HD void reset_reservation() { reservation = 0; }
  SOAHEAP_HD bool is_sink() const { return outgoing_count == 0; }

  template <class View>
  SOAHEAP_HD void spawn_car(const View& heap, Network network, std::uint64_t iteration);
  template <class View>
  SOAHEAP_HD void place_initial_car(const View& heap, Network network);
};

class Car : public soaheap::Object<Car> {
 public:
  using FieldTypes = soaheap::fields<Cell*, std::uint64_t, int, int, std::uint32_t>;
  static constexpr const char* kName = "Car";
  soaheap::Field<Car, 0> position;
  soaheap::Field<Car, 1> id;
  soaheap::Field<Car, 2> velocity;
  soaheap::Field<Car, 3> max_velocity;
  soaheap::Field<Car, 4> cell_id;  ///< position's id, so the host can read positions without pointers

  SOAHEAP_HD Car(Cell* cell, std::uint64_t new_id, int new_max_velocity) {
    position = cell;
    id = new_id;
    velocity = 0;
    max_velocity = new_max_velocity;
    cell_id = cell->id;
  }

  SOAHEAP_HD Cell* next_on_route(Cell* cell, const Network& network) const {
    const int count = cell->outgoing_count;
    if (count == 0) return nullptr;
    return cell->outgoing[network.route(id, cell->id, count)];
  }

  /// NaSch rules 1-3 (accelerate, brake to the gap, random slow-down), then reservations.
  SOAHEAP_HD void request(Network network, std::uint64_t iteration) {
    int speed = velocity + 1 < max_velocity ? velocity + 1 : static_cast<int>(max_velocity);
    int gap = 0;
    Cell* cell = position;
    while (gap < speed) {
      Cell* next = next_on_route(cell, network);
      if (next == nullptr || next->car != nullptr) break;
      ++gap;
      cell = next;
      if (next->is_sink()) break;
    }
    if (speed > gap) speed = gap;
    if (speed > 0 && network.slows_down(iteration, id)) --speed;
    velocity = speed;
    const std::uint64_t key = network.priority(iteration, id, cell_id);
    cell = position;
    for (int step = 0; step < speed; ++step) {
      cell = next_on_route(cell, network);
      atomic_max(&static_cast<std::uint64_t&>(cell->reservation), key);
    }
  }

  /// NaSch rule 4: advance through the cells this car won; leave the network at a sink.
  template <class View>
  SOAHEAP_HD void move(const View& heap, Network network, std::uint64_t iteration) {
    const std::uint64_t key = network.priority(iteration, id, cell_id);
    Cell* cell = position;
    int moved = 0;
    for (int step = 0; step < velocity; ++step) {
      Cell* next = next_on_route(cell, network);
      if (static_cast<std::uint64_t>(next->reservation) != key) break;
      cell = next;
      ++moved;
    }
    velocity = moved;
    if (moved == 0) return;
    position->car = nullptr;
    if (cell->is_sink()) {
      soaheap::destroy(heap, this);
      return;
    }
    cell->car = this;
    position = cell;
    cell_id = cell->id;
  }
};

template <class View>
SOAHEAP_HD void Cell::spawn_car(const View& heap, Network network, std::uint64_t iteration) {
  if (source == 0 || car != nullptr || !network.spawns(iteration, id)) return;
  const std::uint64_t car_id = network.spawned_car_id(iteration, id);
  car = new (heap) Car(this, car_id, network.max_velocity(car_id));
}

template <class View>
SOAHEAP_HD void Cell::place_initial_car(const View& heap, Network network) {
  if (!network.initially_occupied(id)) return;
  car = new (heap) Car(this, id, network.max_velocity(id));
}

using TrafficHeap = soaheap::Heap<Cell, Car>;
using View = TrafficHeap::View;

struct CreateCells {
  View heap;
  Cell** cells;
  Network network;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    cells[tid] = new (heap) Cell(static_cast<std::uint32_t>(tid), network);
  }
};

struct LinkCells {
  Cell** cells;
  Network network;
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    const auto cell = static_cast<std::uint32_t>(tid);
    Cell* self = cells[tid];
    for (int k = 0; k < network.outgoing_count(cell); ++k) self->outgoing[k] = cells[network.outgoing(cell, k)];
  }
};

/// The simulation on a heap.
class Simulation {
 public:
  explicit Simulation(const Network& network) : network_(network) {}

  static soaheap::HeapOptions heap_options(const Network& network, soaheap::Backend backend) {
    soaheap::HeapOptions options;
    // Cells, plus at most one car per cell, plus slack for partly filled blocks.
    options.objects = 3ull * network.cell_count() + 64 * 64;
    options.backend = backend;
    return options;
  }

  void setup(TrafficHeap& heap) const {
    soaheap::detail::Memory cells(heap.backend(), network_.cell_count() * sizeof(Cell*));
    heap.launch(network_.cell_count(), CreateCells{heap.view(), cells.as<Cell*>(), network_});
    heap.launch(network_.cell_count(), LinkCells{cells.as<Cell*>(), network_});
    heap.parallel_do<Cell, &Cell::place_initial_car<View>>(heap.view(), network_);
  }

  void step(TrafficHeap& heap, std::uint64_t iteration) const {
    heap.parallel_do<Cell, &Cell::reset_reservation>();
    heap.parallel_do<Car, &Car::request>(network_, iteration);
    heap.parallel_do<Car, &Car::move<View>>(heap.view(), network_, iteration);
    heap.parallel_do<Cell, &Cell::spawn_car<View>>(heap.view(), network_, iteration);
  }

  const Network& network() const { return network_; }

 private:
  Network network_;
};

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

  /// Cells whose occupant (id, velocity) differs between the heap and this reference.
  std::uint64_t compare(const TrafficHeap& heap) const {
    std::vector<std::optional<Vehicle>> seen(network_.cell_count());
    std::uint64_t mismatches = 0;
    heap.for_each<Car>([&](const Car* car) {
      const std::uint32_t cell = car->cell_id;
      if (cell >= seen.size() || seen[cell]) {
        ++mismatches;
        return;
      }
      seen[cell] = Vehicle{car->id, car->velocity, car->max_velocity};
    });
    for (std::uint32_t cell = 0; cell < network_.cell_count(); ++cell) {
      const auto& a = seen[cell];
      const auto& b = cars_[cell];
      if (a.has_value() != b.has_value() || (a && (a->id != b->id || a->velocity != b->velocity))) ++mismatches;
    }
    return mismatches;
  }

 private:
  Network network_;
  std::vector<std::optional<Vehicle>> cars_;
};

constexpr std::uint32_t kReferenceMaxStreets = 256;

}  // namespace traffic

namespace {

int run_app(int argc, char** argv) {
  CLI::App cli{"Traffic: Nagel-Schreckenberg on a street network of Cell objects; Car objects are created at sources "
               "and destroyed at sinks. --size is the number of streets"};
  soaheap_app::CommonOptions common(cli, soaheap_app::AppDefaults{256, 65536, 200, 1000});
  traffic::Network network;
  network.length = 64;
  cli.add_option("--street-length", network.length, "cells per street")->capture_default_str()->check(CLI::Range(2, 1 << 16));
  cli.add_option("--density", network.initial_density, "initial share of occupied cells")->capture_default_str();
  cli.add_option("--spawn-probability", network.spawn_probability, "chance per step that a free source cell gets a car")
      ->capture_default_str();
  cli.add_option("--slow-down", network.slow_down_probability, "NaSch random slow-down probability")->capture_default_str();
  CLI11_PARSE(cli, argc, argv);
  const soaheap_app::AppOptions options = common.finalize();
  network.streets = static_cast<std::uint32_t>(options.size);
  network.seed = options.seed;

  traffic::TrafficHeap heap(traffic::Simulation::heap_options(network, options.backend));
  soaheap_app::AppRun<traffic::TrafficHeap> run("traffic", options, heap);
  std::optional<traffic::Network> side_network;  // too large for the reference: check a small network
  if (network.streets > traffic::kReferenceMaxStreets) {
    side_network = network;
    side_network->streets = traffic::kReferenceMaxStreets / 4;
  }
  const soaheap_app::ReferenceCheck check =
      soaheap_app::run_with_reference_check<traffic::Simulation, traffic::Reference>(options, run, heap, network,
                                                                                     side_network);
  const std::uint64_t cars = heap.count<traffic::Car>();
  heap.validate(soaheap::Validation::structure);
  nlohmann::json extra;
  extra["streets"] = network.streets;
  extra["cells"] = network.cell_count();
  extra["cars"] = cars;
  extra["simulation_time_s"] = check.simulation_seconds;
  extra["self_check_mismatches"] = check.mismatches;
  return run.finish(check.mismatches == 0, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("traffic", [&] { return run_app(argc, argv); });
}
