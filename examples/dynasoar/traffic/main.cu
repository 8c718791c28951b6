// DynaSOAr's traffic model written with soaheap's native API: the street network, rules, constants,
// random draws and kernel sequence of the traffic program in DynaSOAr's example folder
// (example/traffic/dynasoar), so that the same program built through the DynaSOAr shim
// (compat/shim) can be compared with it at equal parameters — the comparison of issue 20,
// tools/gpu/dynasoar-examples.sh compare. examples/traffic is soaheap's own traffic model
// (Nagel-Schreckenberg with reservations and a host reference check); this one exists to measure
// what the shim costs.
//
// The model: intersections at random points of the unit square, each with 1-4 outgoing streets to
// other intersections; a street is a chain of Cell objects (some of them ProducerCells, which
// create cars, some targets, where cars leave); traffic lights (plain structs outside the heap, as
// in DynaSOAr's program) let one incoming street of an intersection through at a time. A Car picks
// a random path of up to its velocity over free cells, slows for speed limits and red lights and
// at random, moves, and is destroyed at a target or sink. The network comes from the C library's
// rand() seeded with 42 on the host, as theirs does; the cars' numbers from cuRAND states.
//
// Self-check: every car's cell holds it, every occupied cell's car is on it, the heap validates;
// `cars` is DynaSOAr's checksum (the number of cars).

#include "examples/common/app.cuh"
#include "examples/common/curand_state.cuh"
#include "examples/common/dynasoar_port.cuh"

#include <soaheap/soaheap.cuh>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace dynasoar_traffic {

// DynaSOAr's example/traffic/configuration.h.
constexpr int kSeed = 42;
constexpr int kMaxVelocity = 10;
constexpr int kMaxDegree = 4;
constexpr float kCellLength = 0.005f;
constexpr float kProducerRatio = 0.02f;
constexpr float kTargetRatio = 0.003f;
constexpr float kCarAllocationRatio = 0.02f;
constexpr int kPhaseTime = 5;

class Car;

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes = soaheap::fields<soaheap::array<Cell*, kMaxDegree>, soaheap::array<Cell*, kMaxDegree>, Car*, int, int,
                                     int, int, float, float, bool>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> incoming;
  soaheap::Field<Cell, 1> outgoing;
  soaheap::Field<Cell, 2> car;
  soaheap::Field<Cell, 3> max_velocity;
  soaheap::Field<Cell, 4> current_max_velocity;
  soaheap::Field<Cell, 5> num_incoming;
  soaheap::Field<Cell, 6> num_outgoing;
  soaheap::Field<Cell, 7> x;
  soaheap::Field<Cell, 8> y;
  soaheap::Field<Cell, 9> is_target;

  SOAHEAP_HD Cell(int new_max_velocity, float new_x, float new_y) {
    for (int k = 0; k < kMaxDegree; ++k) {
      incoming[k] = nullptr;
      outgoing[k] = nullptr;
    }
    car = nullptr;
    max_velocity = new_max_velocity;
    current_max_velocity = new_max_velocity;
    num_incoming = 0;
    num_outgoing = 0;
    x = new_x;
    y = new_y;
    is_target = false;
  }

  SOAHEAP_HD bool is_free() const { return static_cast<Car*>(car) == nullptr; }
  SOAHEAP_HD bool is_sink() const { return num_outgoing == 0; }
  SOAHEAP_HD void occupy(Car* arriving) { car = arriving; }
  SOAHEAP_HD void release() { car = nullptr; }
  SOAHEAP_HD void remove_speed_limit() { current_max_velocity = static_cast<int>(max_velocity); }

  /// Self-check: counts[2] occupied cells, counts[3] those whose car is on another cell.
  SOAHEAP_HD void check(std::uint64_t* counts);
};

class Car : public soaheap::Object<Car> {
 public:
  using FieldTypes = soaheap::fields<curandState_t, soaheap::array<Cell*, kMaxVelocity>, Cell*, int, int, int>;
  static constexpr const char* kName = "Car";
  soaheap::Field<Car, 0> random_state;
  soaheap::Field<Car, 1> path;
  soaheap::Field<Car, 2> position;
  soaheap::Field<Car, 3> path_length;
  soaheap::Field<Car, 4> velocity;
  soaheap::Field<Car, 5> max_velocity;

  SOAHEAP_HD Car(int seed, Cell* cell, int new_max_velocity) {
    position = cell;
    path_length = 0;
    velocity = 0;
    max_velocity = new_max_velocity;
    cell->occupy(this);
    soaheap_app::random_init(static_cast<unsigned long long>(seed), 0, random_state.address());
  }

  /// A number in [a, b), computed in unsigned arithmetic as DynaSOAr's `curand() % (b - a) + a`.
  SOAHEAP_HD int random_int(int a, int b) {
    return static_cast<int>(soaheap_app::random_bits(random_state.address()) % static_cast<unsigned>(b - a) +
                            static_cast<unsigned>(a));
  }

  /// Chooses the path of this step: accelerate, extend over free cells, obey limits, maybe slow down.
  SOAHEAP_HD void step_prepare_path() {
    path_length = 0;
    // Accelerate by 1 or 2, up to the car's maximum.
    const int speedup = random_int(0, 2) + 1;
    const int limit = max_velocity;
    velocity = limit < velocity + speedup ? limit : velocity + speedup;
    extend_path();
    constrain_velocity();
    // 20 % chance to slow down (the draw happens whatever the velocity).
    if (soaheap_app::random_uniform(random_state.address()) < 0.2 && velocity > 0) velocity -= 1;
  }

  /// A random walk over free cells, up to `velocity` of them, ending at a sink or target.
  SOAHEAP_HD void extend_path() {
    Cell* cell = position;
    const int steps = velocity;
    int length = 0;
    for (int i = 0; i < steps; ++i) {
      if (cell->is_sink() || cell->is_target) break;
      Cell* next = cell->outgoing[random_int(0, cell->num_outgoing)];
      if (!next->is_free()) break;
      cell = next;
      path[i] = cell;
      ++length;
    }
    path_length = length;
    velocity = length;
  }

  /// Slows down to the speed limits of the cells ahead (a red light's is 0) and stops before an
  /// occupied one.
  SOAHEAP_HD void constrain_velocity() {
    Cell* here = position;
    if (velocity > here->current_max_velocity) velocity = static_cast<int>(here->current_max_velocity);
    int path_index = 0;
    int distance = 1;
    while (distance <= velocity) {
      Cell* next = path[path_index];
      if (!next->is_free()) {
        --distance;
        velocity = distance;
        break;
      }
      const int limit = next->current_max_velocity;
      if (velocity > limit) {
        if (limit > distance - 1) {
          velocity = limit;  // slower, but still moving on
        } else {
          --distance;
          velocity = distance;
          break;
        }
      }
      ++distance;
      ++path_index;
    }
  }

  template <class View>
  SOAHEAP_HD void step_move(const View& heap) {
    const int steps = velocity;
    if (steps <= 0) return;
    Cell* cell = path[steps - 1];
    static_cast<Cell*>(position)->release();
    cell->occupy(this);
    position = cell;
    if (cell->is_sink() || cell->is_target) {
      // Leaves the network (producers create new cars).
      cell->release();
      position = nullptr;
      soaheap::destroy(heap, this);
    }
  }

  /// Self-check: counts[0] cars, counts[1] cars whose cell does not hold them.
  SOAHEAP_HD void check(std::uint64_t* counts) {
    soaheap::detail::atomic_fetch_add(&counts[0], 1);
    Cell* cell = position;
    if (cell == nullptr || static_cast<Car*>(cell->car) != this) soaheap::detail::atomic_fetch_add(&counts[1], 1);
  }
};

SOAHEAP_HD inline void Cell::check(std::uint64_t* counts) {
  Car* occupant = car;
  if (occupant == nullptr) return;
  soaheap::detail::atomic_fetch_add(&counts[2], 1);
  if (static_cast<Cell*>(occupant->position) != this) soaheap::detail::atomic_fetch_add(&counts[3], 1);
}

class ProducerCell : public soaheap::Object<ProducerCell, Cell> {
 public:
  using FieldTypes = soaheap::fields<curandState_t>;
  static constexpr const char* kName = "ProducerCell";
  soaheap::Field<ProducerCell, 0> random_state;

  SOAHEAP_HD ProducerCell(int new_max_velocity, float new_x, float new_y, int seed) : Object(new_max_velocity, new_x, new_y) {
    soaheap_app::random_init(static_cast<unsigned long long>(seed), 0, random_state.address());
  }

  /// Puts a new car on this cell with probability kCarAllocationRatio when it is free.
  template <class View>
  SOAHEAP_HD void create_car(const View& heap) {
    if (!is_free()) return;
    curandState_t* state = random_state.address();
    if (soaheap_app::random_uniform(state) < kCarAllocationRatio) {
      const int seed = static_cast<int>(soaheap_app::random_bits(state));
      const int car_max_velocity = static_cast<int>(soaheap_app::random_bits(state) % (kMaxVelocity / 2) + kMaxVelocity / 2);
      // Out of memory: no car this time (the heap reports it at its next host call).
      (void)(new (heap) Car(seed, this, car_max_velocity));
    }
  }
};

using TrafficHeap = soaheap::Heap<Car, Cell, ProducerCell>;
using View = TrafficHeap::View;

/// An intersection of the generated network (DynaSOAr's Node): its streets out, with the
/// intersection each leads to and the incoming slot there, and the street ends that come in.
struct Node {
  int num_outgoing;
  int num_incoming;
  Cell* cell_out[kMaxDegree];
  Cell* cell_in[kMaxDegree];
  int node_out[kMaxDegree];
  int node_out_pos[kMaxDegree];
  float x, y;
};

/// One intersection's lights: the street ends that come in, one of them green at a time.
struct TrafficLight {
  Cell* cells[kMaxDegree];
  int num_cells;
  int timer;
  int phase_time;
  int phase;
};

/// The network as DynaSOAr's program generates it: rand() seeded with kSeed, degrees 1-4, each
/// street to a random other intersection with a free incoming slot.
/// @throw soaheap::usage_error when the intersections cannot be wired (too few of them)
inline std::vector<Node> create_network_structure(int intersections) {
  std::srand(kSeed);
  const auto random_float = [] { return static_cast<float>(std::rand()) / static_cast<float>(RAND_MAX); };
  std::vector<Node> nodes(static_cast<std::size_t>(intersections));
  for (Node& node : nodes) {
    node.num_outgoing = std::rand() % kMaxDegree + 1;
    node.num_incoming = 0;
    node.x = random_float();
    node.y = random_float();
  }
  // Their search retries until it finds a target; bounded here, so a network too small to wire
  // is an error instead of an endless loop.
  const long long max_attempts = 1000LL * intersections + 1000;
  for (int i = 0; i < intersections; ++i) {
    for (int k = 0; k < nodes[i].num_outgoing; ++k) {
      long long attempts = 0;
      while (true) {
        if (++attempts > max_attempts) {
          throw soaheap::usage_error("--size " + std::to_string(intersections) +
                                     ": too few intersections to give every street a target");
        }
        const int target = std::rand() % intersections;
        if (target != i && nodes[target].num_incoming < kMaxDegree) {
          nodes[i].node_out[k] = target;
          nodes[i].node_out_pos[k] = nodes[target].num_incoming;
          ++nodes[target].num_incoming;
          break;
        }
      }
    }
  }
  return nodes;
}

/// The first cell of every street of intersection i.
struct CreateNodes {
  View heap;
  Node* nodes;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    curandState_t state;
    soaheap_app::random_init(i, 0, &state);
    Node& node = nodes[i];
    for (int j = 0; j < node.num_outgoing; ++j) {
      node.cell_out[j] = new (heap) Cell(static_cast<int>(soaheap_app::random_bits(&state) % (kMaxVelocity / 2) + kMaxVelocity / 2),
                                         node.x, node.y);
    }
  }
};

/// The cells of every street of intersection i, linked; the last one is the red end at the target.
struct CreateEdges {
  View heap;
  Node* nodes;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    curandState_t state;
    soaheap_app::random_init(i, 0, &state);
    Node& node = nodes[i];
    for (int k = 0; k < node.num_outgoing; ++k) {
      Node& target = nodes[node.node_out[k]];
      const int target_pos = node.node_out_pos[k];
      Cell* from = node.cell_out[k];
      const float from_x = from->x;
      const float from_y = from->y;
      const float dx = target.x - from_x;
      const float dy = target.y - from_y;
      const int steps = static_cast<int>(sqrtf(dx * dx + dy * dy) / kCellLength);
      const float step_x = dx / steps;
      const float step_y = dy / steps;
      Cell* previous = from;
      for (int j = 0; j < steps; ++j) {
        const float new_x = from_x + j * step_x;
        const float new_y = from_y + j * step_y;
        Cell* next;
        if (soaheap_app::random_uniform(&state) < kProducerRatio) {
          next = new (heap) ProducerCell(previous->max_velocity, new_x, new_y, static_cast<int>(soaheap_app::random_bits(&state)));
        } else {
          next = new (heap) Cell(previous->max_velocity, new_x, new_y);
        }
        if (next == nullptr) return;  // out of memory: reported by the heap at its next host call
        if (soaheap_app::random_uniform(&state) < kTargetRatio) next->is_target = true;
        previous->num_outgoing = 1;
        previous->outgoing[0] = next;
        next->num_incoming = 1;
        next->incoming[0] = previous;
        previous = next;
      }
      // The street's last cell feeds every street leaving the target intersection.
      previous->num_outgoing = target.num_outgoing;
      for (int j = 0; j < target.num_outgoing; ++j) {
        Cell* next = target.cell_out[j];
        previous->outgoing[j] = next;
        next->incoming[target_pos] = previous;
      }
      previous->current_max_velocity = 0;
      target.cell_in[target_pos] = previous;
    }
  }
};

/// Intersection i's light, every incoming street end red.
struct CreateTrafficLights {
  Node* nodes;
  TrafficLight* lights;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const Node& node = nodes[i];
    TrafficLight& light = lights[i];
    light.num_cells = node.num_incoming;
    light.timer = 0;
    light.phase_time = kPhaseTime;
    light.phase = 0;
    for (int j = 0; j < node.num_outgoing; ++j) node.cell_out[j]->num_incoming = node.num_incoming;
    for (int j = 0; j < node.num_incoming; ++j) {
      light.cells[j] = node.cell_in[j];
      node.cell_in[j]->current_max_velocity = 0;
    }
  }
};

/// Every kPhaseTime steps the green street end turns red and the next one green.
struct StepTrafficLights {
  TrafficLight* lights;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    TrafficLight& light = lights[i];
    if (light.num_cells <= 0) return;
    light.timer = (light.timer + 1) % light.phase_time;
    if (light.timer == 0) {
      light.cells[light.phase]->current_max_velocity = 0;
      light.phase = (light.phase + 1) % light.num_cells;
      light.cells[light.phase]->remove_speed_limit();
    }
  }
};

}  // namespace dynasoar_traffic

namespace {

using dynasoar_traffic::Car;
using dynasoar_traffic::Cell;
using dynasoar_traffic::Node;
using dynasoar_traffic::ProducerCell;
using dynasoar_traffic::TrafficLight;
using dynasoar_traffic::View;

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli(
      "DynaSOAr's traffic (example/traffic/dynasoar: its street network, rules, constants and random numbers) written "
      "with soaheap's native API, to compare with that program through the DynaSOAr shim; --size is the number of "
      "intersections",
      soaheap_app::AppDefaults{500, 17500, 100, 12000});
  std::uint64_t heap_objects = soaheap_app::kDynasoarObjects / 2;  // their configuration.h: 32*64*64*64
  soaheap_app::add_heap_objects_option(cli, heap_objects);
  bool wait_each_operation = false;
  cli.flag("--wait-each-operation", wait_each_operation,
           "wait for the GPU after every operation of a step, as DynaSOAr's API and its program do (the shim's "
           "default), to split the shim's cost from the cost of those waits");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  if (options.size < 2 || options.size > 10000000) {
    throw soaheap::usage_error("--size " + std::to_string(options.size) + ": the number of intersections must be in [2, 10000000]");
  }
  const int intersections = static_cast<int>(options.size);
  const std::vector<Node> network = dynasoar_traffic::create_network_structure(intersections);

  soaheap::HeapOptions heap_options;
  heap_options.objects = heap_objects;
  heap_options.backend = options.backend;
  dynasoar_traffic::TrafficHeap heap(heap_options);
  soaheap_app::AppRun<dynasoar_traffic::TrafficHeap> run("dynasoar_traffic", options, heap);

  soaheap::detail::Memory nodes(heap.backend(), network.size() * sizeof(Node));
  nodes.copy_from_host(0, network.data(), network.size() * sizeof(Node));
  soaheap::detail::Memory lights(heap.backend(), network.size() * sizeof(TrafficLight));
  Node* device_nodes = nodes.as<Node>();
  TrafficLight* device_lights = lights.as<TrafficLight>();
  heap.launch(network.size(), dynasoar_traffic::CreateNodes{heap.view(), device_nodes});
  heap.launch(network.size(), dynasoar_traffic::CreateEdges{heap.view(), device_nodes});
  heap.launch(network.size(), dynasoar_traffic::CreateTrafficLights{device_nodes, device_lights});

  const soaheap_app::IterationClock clock(heap);
  // DynaSOAr's parallel_do returns after the GPU finished, and its traffic waits after its own
  // light kernel: four waits a step, which --wait-each-operation reproduces.
  const auto wait = [&] {
    if (wait_each_operation) heap.synchronize();
  };
  for (int iteration = 0; iteration < options.iterations; ++iteration) {
    heap.parallel_do<ProducerCell, &ProducerCell::create_car<View>>(heap.view());
    wait();
    heap.launch(network.size(), dynasoar_traffic::StepTrafficLights{device_lights});
    wait();
    heap.parallel_do<Car, &Car::step_prepare_path>();
    wait();
    heap.parallel_do<Car, &Car::step_move<View>>(heap.view());
    wait();
    run.after_iteration(iteration);
  }
  const double iterations_seconds = clock.seconds();
  run.stop_clock();

  soaheap::detail::Memory counts(heap.backend(), 4 * sizeof(std::uint64_t));
  counts.fill_zero();
  heap.parallel_do<Car, &Car::check>(counts.as<std::uint64_t>());
  heap.parallel_do<Cell, &Cell::check>(counts.as<std::uint64_t>());
  std::uint64_t host_counts[4] = {};
  heap.synchronize();
  counts.copy_to_host(host_counts, 0, sizeof(host_counts));
  heap.validate(soaheap::Validation::structure);
  const bool passed = host_counts[1] == 0 && host_counts[3] == 0 && host_counts[0] == host_counts[2];
  soaheap_app::Result extra;
  extra["iterations_time_s"] = iterations_seconds;
  extra["intersections"] = intersections;
  extra["cells"] = heap.count<Cell>();
  extra["producer_cells"] = heap.count<ProducerCell>();
  extra["cars"] = host_counts[0];
  extra["misplaced_cars"] = host_counts[1] + host_counts[3];
  return run.finish(passed, extra);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("dynasoar_traffic", [&] { return run_app(argc, argv); });
}
