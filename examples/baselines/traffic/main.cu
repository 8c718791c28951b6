// Traffic baseline: the Nagel-Schreckenberg rules of examples/traffic (examples/applications/traffic/rules.cuh:
// same procedural street network, routes, counter-based slow-downs, spawns and reservation
// priorities) written by hand on fixed per-cell SOA arrays with no allocator: a car is the car
// fields of the cell it is in ("classes merged with the cell", as the DynaSOAr paper's baselines
// do), and the network is two arrays of outgoing cell indices. Kernels run through the same
// executor as the heap (CUDA grid or host thread pool). Prints the same JSON fields as traffic and
// compares the final network with the sequential reference cell by cell.

#include "examples/common/baseline.cuh"
#include "examples/common/cell_arrays.cuh"
#include "examples/applications/traffic/rules.cuh"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace traffic_baseline {

using namespace traffic;

constexpr std::uint64_t kNoCar = ~std::uint64_t{0};  ///< car id of an empty cell
constexpr std::uint32_t kNoCell = ~std::uint32_t{0};

/// One array per field, indexed by cell id. Velocities are at most 5 and fit a byte.
struct Cells {
  // The network (written once).
  std::uint32_t* outgoing[kMaxOutgoing];
  std::uint8_t* outgoing_count;  ///< 0 for a sink
  std::uint8_t* source;
  // This step's reservations and which cells held a car when it started.
  std::uint64_t* reservation;
  std::uint8_t* acting;
  // The car merged into the cell.
  std::uint64_t* car_id;  ///< kNoCar for an empty cell
  std::uint8_t* velocity;
  std::uint8_t* max_velocity;

  /// The cell after @p cell on the route of car @p car, kNoCell at a sink.
  SOAHEAP_HD std::uint32_t next_on_route(std::uint64_t car, std::uint32_t cell, const Network& network) const {
    const int count = outgoing_count[cell];
    if (count == 0) return kNoCell;
    return outgoing[network.route(car, cell, count)][cell];
  }

  SOAHEAP_HD void place_car(std::uint32_t cell, std::uint64_t id, const Network& network) const {
    car_id[cell] = id;
    velocity[cell] = 0;
    max_velocity[cell] = static_cast<std::uint8_t>(network.max_velocity(id));
  }
};

struct Initialize {
  Cells g;
  Network network;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t cell = static_cast<std::uint32_t>(index);
    const int count = network.outgoing_count(cell);
    for (int k = 0; k < kMaxOutgoing; ++k) g.outgoing[k][cell] = k < count ? network.outgoing(cell, k) : kNoCell;
    g.outgoing_count[cell] = static_cast<std::uint8_t>(count);
    g.source[cell] = network.is_source(cell) ? 1 : 0;
    g.reservation[cell] = 0;
    g.car_id[cell] = kNoCar;
    if (network.initially_occupied(cell)) g.place_car(cell, cell, network);
  }
};

/// NaSch rules 1-3 (accelerate, brake to the gap, random slow-down) for the car on the cell, then
/// its reservations along the route.
struct Request {
  Cells g;
  Network network;
  std::uint64_t iteration;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t cell = static_cast<std::uint32_t>(index);
    const std::uint64_t car = g.car_id[cell];
    g.acting[cell] = car != kNoCar ? 1 : 0;
    if (car == kNoCar) return;
    const int max_velocity = g.max_velocity[cell];
    int speed = g.velocity[cell] + 1 < max_velocity ? g.velocity[cell] + 1 : max_velocity;
    int gap = 0;
    std::uint32_t at = cell;
    while (gap < speed) {
      const std::uint32_t next = g.next_on_route(car, at, network);
      if (next == kNoCell || g.car_id[next] != kNoCar) break;
      ++gap;
      at = next;
      if (g.outgoing_count[next] == 0) break;
    }
    if (speed > gap) speed = gap;
    if (speed > 0 && network.slows_down(iteration, car)) --speed;
    g.velocity[cell] = static_cast<std::uint8_t>(speed);
    const std::uint64_t key = network.priority(iteration, car, cell);
    at = cell;
    for (int step = 0; step < speed; ++step) {
      at = g.next_on_route(car, at, network);
      atomic_max(&g.reservation[at], key);
    }
  }
};

/// NaSch rule 4: the car that was on the cell at the start of the step advances through the cells
/// it won and leaves the network at a sink. The cells it enters were empty at the request (their
/// own threads do nothing), and only the winner writes them.
struct Move {
  Cells g;
  Network network;
  std::uint64_t iteration;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t cell = static_cast<std::uint32_t>(index);
    if (g.acting[cell] == 0) return;
    const std::uint64_t car = g.car_id[cell];
    const std::uint64_t key = network.priority(iteration, car, cell);
    const int velocity = g.velocity[cell];
    std::uint32_t at = cell;
    int moved = 0;
    for (int step = 0; step < velocity; ++step) {
      const std::uint32_t next = g.next_on_route(car, at, network);
      if (soaheap::detail::atomic_load(&g.reservation[next]) != key) break;
      at = next;
      ++moved;
    }
    if (moved == 0) {
      g.velocity[cell] = 0;
      return;
    }
    g.car_id[cell] = kNoCar;
    if (g.outgoing_count[at] == 0) return;  // reached a sink: leaves the network
    g.car_id[at] = car;
    g.velocity[at] = static_cast<std::uint8_t>(moved);
    g.max_velocity[at] = g.max_velocity[cell];
  }
};

/// A free source cell may get a new car; the reservations start empty for the next step.
struct Spawn {
  Cells g;
  Network network;
  std::uint64_t iteration;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t cell = static_cast<std::uint32_t>(index);
    g.reservation[cell] = 0;
    if (g.source[cell] == 0 || g.car_id[cell] != kNoCar || !network.spawns(iteration, cell)) return;
    g.place_car(cell, network.spawned_car_id(iteration, cell), network);
  }
};

/// The model on per-cell arrays in the backend's memory.
class Simulation {
 public:
  Simulation(const soaheap::detail::Executor& executor, const Network& network)
      : executor_(executor), network_(network), arrays_(executor.backend, network.cell_count()) {
    for (int k = 0; k < kMaxOutgoing; ++k) cells_.outgoing[k] = arrays_.add<std::uint32_t>();
    cells_.outgoing_count = arrays_.add<std::uint8_t>();
    cells_.source = arrays_.add<std::uint8_t>();
    cells_.reservation = arrays_.add<std::uint64_t>();
    cells_.acting = arrays_.add<std::uint8_t>();
    cells_.car_id = arrays_.add<std::uint64_t>();
    cells_.velocity = arrays_.add<std::uint8_t>();
    cells_.max_velocity = arrays_.add<std::uint8_t>();
    executor_.launch(arrays_.cells(), Initialize{cells_, network_});
  }

  /// Launches the kernels of one step (asynchronously on cuda).
  void step(std::uint64_t iteration) const {
    executor_.launch(arrays_.cells(), Request{cells_, network_, iteration});
    executor_.launch(arrays_.cells(), Move{cells_, network_, iteration});
    executor_.launch(arrays_.cells(), Spawn{cells_, network_, iteration});
  }

  std::uint64_t memory_bytes() const { return arrays_.bytes(); }

  /// The car on every cell (waits for the launched steps).
  std::vector<std::optional<Reference::Vehicle>> cars() const {
    executor_.synchronize();
    const std::vector<std::uint64_t> ids = arrays_.to_host(cells_.car_id);
    const std::vector<std::uint8_t> velocity = arrays_.to_host(cells_.velocity);
    const std::vector<std::uint8_t> max_velocity = arrays_.to_host(cells_.max_velocity);
    std::vector<std::optional<Reference::Vehicle>> cars(ids.size());
    for (std::size_t cell = 0; cell < ids.size(); ++cell)
      if (ids[cell] != kNoCar) cars[cell] = Reference::Vehicle{ids[cell], velocity[cell], max_velocity[cell]};
    return cars;
  }

 private:
  const soaheap::detail::Executor& executor_;
  Network network_;
  soaheap_app::CellArrays arrays_;
  Cells cells_{};
};

}  // namespace traffic_baseline

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::AppOptions options;
  traffic::Network network;
  if (const auto exit_code = soaheap_app::parse_with_model(
          argc, argv,
          "Traffic baseline: the Nagel-Schreckenberg rules of traffic on fixed per-cell arrays, without an "
          "allocator. --size is the number of streets",
          traffic::kRunDefaults, traffic::network_of, options, network))
    return *exit_code;
  using traffic_baseline::Simulation;
  return soaheap_app::run_baseline<Simulation>(
      "traffic_baseline", options, network, traffic::side_run_of(network),
      [&](const traffic::Network& checked_network, const Simulation& checked) {
        return soaheap_app::reference_after<traffic::Reference>(options.iterations, checked_network)
            .compare(checked.cars());
      },
      [&](const Simulation& simulation, soaheap_app::BaselineResult& result) {
        std::uint64_t cars = 0;
        for (const auto& car : simulation.cars()) cars += car.has_value() ? 1 : 0;
        result.objects = {{"Cell", network.cell_count()}, {"Car", cars}};
        result.extra["streets"] = network.streets;
        result.extra["cells"] = network.cell_count();
        result.extra["cars"] = cars;
      });
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("traffic_baseline", [&] { return run_app(argc, argv); });
}
