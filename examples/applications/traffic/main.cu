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
#include "examples/common/reference_check.cuh"
#include "examples/applications/traffic/rules.cuh"

#include <soaheap/soaheap.cuh>

#include <cstdint>
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace traffic {

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

  /// Cars are best visited in the order of the cells they are on (the policies compact them so).
  static void define_orders(soaheap_app::AppRun<TrafficHeap>& run) {
    run.define_order<Car>("field:position", soaheap::order_by_pointer_field<&Car::position>());
  }

  void setup(TrafficHeap& heap) const {
    soaheap::detail::Memory cells(heap.backend(), network_.cell_count() * sizeof(Cell*));
    // A growing heap maps the cells' blocks before the kernel that creates them all: one kernel
    // may grow the heap only to growth_headroom times its size at launch.
    if (heap.growable())
      heap.reserve_blocks(heap.mapped_block_count() + network_.cell_count() / TrafficHeap::capacity<Cell> + 1);
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

/// Cells whose car on @p heap differs from @p reference (a car on a cell that already has one counts
/// as a mismatch too).
inline std::uint64_t compare(const Reference& reference, const Network& network, const TrafficHeap& heap) {
  std::vector<std::optional<Reference::Vehicle>> seen(network.cell_count());
  std::uint64_t mismatches = 0;
  heap.for_each<Car>([&](const Car* car) {
    const std::uint32_t cell = car->cell_id;
    if (cell >= seen.size() || seen[cell]) {
      ++mismatches;
      return;
    }
    seen[cell] = Reference::Vehicle{car->id, car->velocity, car->max_velocity};
  });
  return mismatches + reference.compare(seen);
}

}  // namespace traffic

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::AppOptions options;
  traffic::Network network;
  if (const auto exit_code = soaheap_app::parse_with_model(
          argc, argv,
          "Traffic: Nagel-Schreckenberg on a street network of Cell objects; Car objects are created at sources "
          "and destroyed at sinks. --size is the number of streets",
          traffic::kRunDefaults, traffic::network_of, options, network))
    return *exit_code;

  return soaheap_app::run_checked_simulation<traffic::Simulation, traffic::Reference, traffic::TrafficHeap>(
      "traffic", options, network, traffic::side_run_of(network),
      [](const auto& reference, const auto& checked_model, const auto& checked) {
        return traffic::compare(reference, checked_model, checked);
      },
      [&](const traffic::TrafficHeap& heap, soaheap_app::Result& extra) {
        extra["streets"] = network.streets;
        extra["cells"] = network.cell_count();
        extra["cars"] = heap.count<traffic::Car>();
      });
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("traffic", [&] { return run_app(argc, argv); });
}
