// Particles in a box, partitioned into row slabs over ranks: the deterministic application of
// soaheap::distributed. A box of size × size unit cells holds Particle objects; each points to
// its Cell. Every step each particle counts itself into its cell, then moves: its velocity is
// damped by the crowd in its cell and kicked by a counter-based random number of (id, step), its
// position advances by less than one cell, and it reflects off the walls. A rank owns the cells of
// its rows plus one halo row on each side; a particle that stepped into a halo cell migrates to
// the rank that owns that row, its cell pointer translated through the global cell index.
//
// Why the result does not depend on the number of ranks: a particle's new state is a function of
// its own state, its id, the step and the integer count of its cell, and every particle of a cell
// sits on the cell's owner when the counting happens. So the final state is bit-identical for any
// rank count; the self-check compares an order-independent checksum of every particle's bits,
// summed over the ranks, with a single-rank host-side replay of the same rules. The replay runs on
// one host thread, so by default (`--check auto`) a run of more than kFullReplayParticleSteps
// particle-steps is checked through a side run of the same rules on a kSideRunSize² box (all ranks
// take part, the same transport); `--check full` replays the run itself, `--check none` skips it.
//
// Ranks: `--ranks N` runs N ranks as threads of this process (LocalGroup, host or cuda backend);
// `--transport mpi` runs one rank per MPI process, any number per GPU or none on the host backend
// (`mpirun -np 3 particles --backend host --transport mpi`, SOAHEAP_HAS_MPI); `--transport nccl`
// one rank per MPI process, each on its own GPU (`mpirun -np 2 particles --transport nccl`).

#include "examples/common/counter_hash.cuh"
#include "examples/common/ranks.cuh"

#include <soaheap/distributed/migrate.cuh>
#include <soaheap/distributed/row_halo.hpp>
#include <soaheap/soaheap.cuh>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace particles {

namespace dist = soaheap::distributed;

constexpr double kMaxSpeed = 0.9;  ///< cells per step: a particle never skips the halo row

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes = soaheap::fields<std::uint32_t, std::uint32_t, std::uint64_t>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> row;
  soaheap::Field<Cell, 1> column;
  soaheap::Field<Cell, 2> count;  ///< particles in the cell this step

  /// Cell @p i of the rank's table, whose first row is @p first_row.
  SOAHEAP_HD Cell(std::uint64_t i, std::uint32_t first_row, std::uint32_t width) {
    row = first_row + static_cast<std::uint32_t>(i / width);
    column = static_cast<std::uint32_t>(i % width);
    count = 0;
  }
  SOAHEAP_HD void register_in(Cell** table, std::uint32_t first_row, std::uint32_t width) {
    table[(row - first_row) * width + column] = this;
  }
  SOAHEAP_HD void reset() { count = 0; }
};

using Slabs = dist::RowSlabs;

/// A rank's cells: its rows and the halo rows, as a table of pointers in the heap's memory.
struct Grid {
  Cell* const* table;
  std::uint32_t width;
  std::uint32_t height;
  std::uint32_t first_row;  ///< first row in the table (a halo row unless it is row 0)
  std::uint32_t rows;       ///< rows in the table
  SOAHEAP_HD Cell* cell_at(std::uint32_t row, std::uint32_t column) const {
    return table[(row - first_row) * width + column];
  }
};

/// The rules of one step for one particle, shared by the heap's method and the host replay.
struct State {
  double x, y, vx, vy;
};

class Particle : public soaheap::Object<Particle> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t, soaheap::array<double, 2>, soaheap::array<double, 2>, Cell*>;
  static constexpr const char* kName = "Particle";
  soaheap::Field<Particle, 0> id;
  soaheap::Field<Particle, 1> position;  ///< x, y in cells
  soaheap::Field<Particle, 2> velocity;  ///< cells per step
  soaheap::Field<Particle, 3> cell;

  SOAHEAP_HD Particle(std::uint64_t new_id, const State& state, Cell* new_cell);
  SOAHEAP_HD State state() const;
  SOAHEAP_HD void set_state(const State& state);
  SOAHEAP_HD void count_in_cell() {
    soaheap::detail::atomic_fetch_add(cell->count.address(), 1);
  }
  SOAHEAP_HD void move(Grid grid, std::uint64_t seed, std::uint64_t step);
  SOAHEAP_HD void add_fingerprint(std::uint64_t* sum);
};

// Rounded products and sums that the device compiler may not fuse into an FMA (the host compiler
// does not either), so that the GPU and the host replay compute the same bits.
SOAHEAP_HD inline double mul(double a, double b) {
#if SOAHEAP_DEVICE_CODE
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
SOAHEAP_HD inline double add(double a, double b) {
#if SOAHEAP_DEVICE_CODE
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
SOAHEAP_HD inline double reflect(double position, double& velocity, double limit) {
  if (position < 0) {
    position = -position;
    velocity = -velocity;
  } else if (position >= limit) {
    position = add(mul(2.0, limit), -position);
    velocity = -velocity;
    if (position >= limit) position = mul(limit, 1 - 1e-12);
  }
  return position;
}
SOAHEAP_HD inline double clamp_speed(double v) { return v > kMaxSpeed ? kMaxSpeed : (v < -kMaxSpeed ? -kMaxSpeed : v); }
SOAHEAP_HD inline State advance(State s, std::uint64_t id, std::uint64_t crowd, std::uint64_t seed, std::uint64_t step,
                                double width, double height) {
  const double damping = 1.0 / add(1.0, mul(0.05, static_cast<double>(crowd - 1)));
  const double kick_x = mul(0.1, add(soaheap_app::uniform(seed, 1, id, step), -0.5));
  const double kick_y = mul(0.1, add(soaheap_app::uniform(seed, 2, id, step), -0.5));
  s.vx = clamp_speed(add(mul(s.vx, damping), kick_x));
  s.vy = clamp_speed(add(mul(s.vy, damping), kick_y));
  s.x = reflect(add(s.x, s.vx), s.vx, width);
  s.y = reflect(add(s.y, s.vy), s.vy, height);
  return s;
}
/// Initial state of particle @p id.
SOAHEAP_HD inline State initial_state(std::uint64_t id, std::uint64_t seed, double width, double height) {
  return State{mul(mul(soaheap_app::uniform(seed, 3, id, 0), width), 1 - 1e-12),
               mul(mul(soaheap_app::uniform(seed, 4, id, 0), height), 1 - 1e-12),
               mul(0.5, add(soaheap_app::uniform(seed, 5, id, 0), -0.5)), mul(0.5, add(soaheap_app::uniform(seed, 6, id, 0), -0.5))};
}
/// The order-independent fingerprint of a particle's bits.
SOAHEAP_HD inline std::uint64_t fingerprint(std::uint64_t id, State s) {
  std::uint64_t words[4];
  const double values[4] = {s.x, s.y, s.vx, s.vy};
  for (int i = 0; i < 4; ++i) std::memcpy(&words[i], &values[i], sizeof(double));
  return soaheap_app::hash4(id, words[0] ^ (words[2] << 1), words[1], words[3]);
}

SOAHEAP_HD inline Particle::Particle(std::uint64_t new_id, const State& state, Cell* new_cell) {
  id = new_id;
  set_state(state);
  cell = new_cell;
}
SOAHEAP_HD inline State Particle::state() const { return State{position[0], position[1], velocity[0], velocity[1]}; }
SOAHEAP_HD inline void Particle::set_state(const State& state) {
  position[0] = state.x;
  position[1] = state.y;
  velocity[0] = state.vx;
  velocity[1] = state.vy;
}
SOAHEAP_HD inline void Particle::move(Grid grid, std::uint64_t seed, std::uint64_t step) {
  const State next = advance(state(), id, cell->count, seed, step, grid.width, grid.height);
  set_state(next);
  cell = grid.cell_at(static_cast<std::uint32_t>(next.y), static_cast<std::uint32_t>(next.x));
}
SOAHEAP_HD inline void Particle::add_fingerprint(std::uint64_t* sum) {
  soaheap::detail::atomic_fetch_add(sum, fingerprint(id, state()));
}

using ParticleHeap = soaheap::Heap<Cell, Particle>;

/// Creates the particles of ids [0, total) whose cell this rank owns.
struct CreateOwned {
  ParticleHeap::View view;
  Grid grid;
  Slabs slabs;
  int rank;
  std::uint64_t seed;
  SOAHEAP_HD void operator()(std::uint64_t id) const {
    const State s = initial_state(id, seed, grid.width, grid.height);
    const auto row = static_cast<std::uint32_t>(s.y);
    if (slabs.owner(row) != rank) return;
    new (view) Particle(id, s, grid.cell_at(row, static_cast<std::uint32_t>(s.x)));
  }
};

/// Where a particle belongs: the owner of its cell's row.
struct OwnerOfCell {
  Slabs slabs;
  SOAHEAP_HD int operator()(Particle* p) const { return slabs.owner(p->cell->row); }
};

/// Cell pointers cross ranks as global cell indices; the receiver owns the cell.
struct CellLinks {
  Grid grid;
  SOAHEAP_HD std::uint64_t to_global(const Cell* c) const {
    return static_cast<std::uint64_t>(c->row) * grid.width + c->column;
  }
  SOAHEAP_HD Cell* to_local(dist::link_type<Cell>, std::uint64_t global) const {
    const auto row = static_cast<std::uint32_t>(global / grid.width);
    if (row < grid.first_row || row >= grid.first_row + grid.rows) return nullptr;
    return grid.cell_at(row, static_cast<std::uint32_t>(global % grid.width));
  }
};

struct Options {
  std::uint32_t size = 0;
  std::uint64_t particles = 0;
  int iterations = 0;
  std::uint64_t seed = 0;
  soaheap::Backend backend{};
};

/// What one rank reports: its figures, and the totals over all ranks.
struct RankResult {
  std::uint64_t particles = 0;        ///< at the end
  std::uint64_t fingerprint = 0;      ///< summed over all ranks
  std::uint64_t total_particles = 0;  ///< summed over all ranks
  dist::MigrationStats migration;
  double setup_seconds = 0;
  double total_seconds = 0;
};

RankResult run_rank(const Options& options, dist::Transport& transport) {
  const auto start = std::chrono::steady_clock::now();
  const Slabs slabs{options.size, transport.size()};
  const int rank = transport.rank();
  const std::uint32_t own_first = slabs.first_row(rank);
  const std::uint32_t own_end = slabs.first_row(rank + 1);
  const std::uint32_t table_first = own_first > 0 ? own_first - 1 : 0;
  const std::uint32_t table_end = own_end < options.size ? own_end + 1 : own_end;
  const std::uint64_t cells = static_cast<std::uint64_t>(table_end - table_first) * options.size;

  // Room for the rank's share of the particles twice over (crowding near a border) plus the cells.
  soaheap::HeapOptions heap_options;
  heap_options.backend = options.backend;
  const std::uint64_t share = options.particles / static_cast<std::uint64_t>(transport.size()) + 1;
  heap_options.objects = cells + 64 * 64 + 8 * (2 * share + 1024);  // a block holds 64 cells, ~8 particles
  ParticleHeap heap(heap_options);
  soaheap::detail::Memory table(options.backend, cells * sizeof(Cell*));
  soaheap::detail::Memory sum(options.backend, sizeof(std::uint64_t));
  heap.parallel_new<Cell>(cells, table_first, options.size);
  heap.parallel_do<Cell, &Cell::register_in>(table.as<Cell*>(), table_first, options.size);
  const Grid grid{table.as<Cell*>(), options.size, options.size, table_first, table_end - table_first};
  heap.launch(options.particles, CreateOwned{heap.view(), grid, slabs, rank, options.seed});
  heap.synchronize();
  RankResult result;
  result.setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.migration.sent_to.assign(static_cast<std::size_t>(transport.size()), 0);
  result.migration.received_from.assign(static_cast<std::size_t>(transport.size()), 0);

  for (int step = 0; step < options.iterations; ++step) {
    heap.parallel_do<Particle, &Particle::count_in_cell>();
    heap.parallel_do<Particle, &Particle::move>(grid, options.seed, static_cast<std::uint64_t>(step));
    heap.parallel_do<Cell, &Cell::reset>();
    result.migration += dist::migrate<Particle>(heap, transport, OwnerOfCell{slabs}, CellLinks{grid});
  }
  heap.synchronize();
  result.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  sum.fill_zero();
  heap.parallel_do<Particle, &Particle::add_fingerprint>(sum.as<std::uint64_t>());
  heap.synchronize();
  std::uint64_t fingerprint_sum = 0;
  sum.copy_to_host(&fingerprint_sum, 0, sizeof(fingerprint_sum));
  result.particles = heap.count<Particle>();
  std::uint64_t totals[2] = {fingerprint_sum, result.particles};
  transport.all_reduce_sum(totals, 2);
  result.fingerprint = totals[0];
  result.total_particles = totals[1];
  return result;
}

/// Largest run (particles × iterations) that `--check auto` replays itself: about a second on one
/// host thread. The cuda default (2048² cells, 4 per cell, 200 steps) is 3.4 G particle-steps.
constexpr std::uint64_t kFullReplayParticleSteps = std::uint64_t{1} << 26;
/// Side of the box of the side run that checks a larger run (256² × 4 particles × 200 steps fits above).
constexpr std::uint32_t kSideRunSize = 256;

/// The same rules on one host thread with plain arrays: the reference the self-check compares with.
std::uint64_t reference_fingerprint(const Options& options) {
  const double width = options.size;
  const double height = options.size;
  std::vector<State> states(options.particles);
  for (std::uint64_t id = 0; id < options.particles; ++id) states[id] = initial_state(id, options.seed, width, height);
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(options.size) * options.size);
  for (int step = 0; step < options.iterations; ++step) {
    std::fill(counts.begin(), counts.end(), 0);
    for (const State& s : states)
      ++counts[static_cast<std::size_t>(static_cast<std::uint32_t>(s.y)) * options.size + static_cast<std::uint32_t>(s.x)];
    for (std::uint64_t id = 0; id < options.particles; ++id) {
      const State& s = states[id];
      const auto crowd = counts[static_cast<std::size_t>(static_cast<std::uint32_t>(s.y)) * options.size +
                                static_cast<std::uint32_t>(s.x)];
      states[id] = advance(s, id, crowd, options.seed, static_cast<std::uint64_t>(step), width, height);
    }
  }
  std::uint64_t sum = 0;
  for (std::uint64_t id = 0; id < options.particles; ++id) sum += fingerprint(id, states[id]);
  return sum;
}

}  // namespace particles

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli("Particles in a box over row slabs of ranks, migrating with soaheap::distributed::migrate; "
                       "--size is the box side in cells",
                       soaheap_app::AppDefaults{32, 2048, 40, 200}, soaheap::cuda_available());
  int particles_per_cell = 4;
  std::string check = "auto";
  bool skip_check = false;
  soaheap_app::RankOptions ranks;
  soaheap_app::add_rank_options(cli, ranks);
  cli.option("--particles-per-cell", particles_per_cell, "particles per cell at the start", 1, 1024);
  cli.choice("--check", check,
             "the self-check against a single-thread host replay: auto (the run itself when it is small, "
             "else a side run on a 256x256 box), full (the run itself, slow for large runs) or none",
             {"auto", "full", "none"});
  cli.flag("--no-check", skip_check, "the same as --check none");
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions common = cli.options();
  particles::Options options;
  options.size = static_cast<std::uint32_t>(common.size);
  options.particles = static_cast<std::uint64_t>(particles_per_cell) * common.size * common.size;
  options.iterations = common.iterations;
  options.seed = common.seed;
  options.backend = common.backend;
  if (skip_check) check = "none";
  // The run that the replay checks: this one, or a side run of the same rules on a smaller box.
  const bool side_run = check == "auto" && options.particles * static_cast<std::uint64_t>(options.iterations) >
                                              particles::kFullReplayParticleSteps &&
                        options.size > particles::kSideRunSize;
  particles::Options checked = options;
  if (side_run) {
    checked.size = particles::kSideRunSize;
    checked.particles = static_cast<std::uint64_t>(particles_per_cell) * checked.size * checked.size;
  }

  soaheap_app::Result line = soaheap_app::rank_result_line("particles", options.backend, common);
  bool passed = false;
  const auto figures = soaheap_app::run_ranks(
      ranks, options.backend, argc, argv, line,
      [&](soaheap::distributed::Transport& transport, soaheap_app::Result* rank0_line) -> std::vector<double> {
        const particles::RankResult result = particles::run_rank(options, transport);
        // Every rank takes part in the side run (it migrates); it is not timed with the run.
        const particles::RankResult side = side_run ? particles::run_rank(checked, transport) : result;
        if (rank0_line != nullptr) {  // the totals are the same on every rank
          soaheap_app::Result& out = *rank0_line;
          out["particles"] = result.total_particles;
          out["fingerprint"] = std::to_string(result.fingerprint);
          passed = result.total_particles == options.particles;
          if (check != "none") {
            const auto check_start = std::chrono::steady_clock::now();
            const std::uint64_t expected = particles::reference_fingerprint(checked);
            passed = passed && expected == side.fingerprint && side.total_particles == checked.particles;
            out["check"] = side_run ? "side run " + std::to_string(checked.size) + "x" + std::to_string(checked.size) : "full";
            if (side_run) out["checked_fingerprint"] = std::to_string(side.fingerprint);
            out["reference_fingerprint"] = std::to_string(expected);
            out["check_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - check_start).count();
          }
        }
        return {result.total_seconds, result.setup_seconds, static_cast<double>(result.migration.sent),
                static_cast<double>(result.migration.bytes_sent), result.migration.seconds,
                static_cast<double>(result.particles)};
      });
  if (!figures) return 0;  // an MPI rank other than 0: rank 0 prints
  line["total_time_s"] = soaheap_app::max_over_ranks(*figures, 0);
  line["setup_time_s"] = soaheap_app::max_over_ranks(*figures, 1);
  soaheap_app::add_rank_lists(line, {"rank_total_time_s", "rank_setup_time_s", "migrated_objects", "migrated_bytes",
                                     "migration_time_s", "rank_particles"},
                              *figures);
  line["self_check"] = check == "none" ? "skipped" : (passed ? "passed" : "failed");
  line.print();
  return passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return soaheap_app::run_main("particles", [&] { return run_app(argc, argv); }); }
