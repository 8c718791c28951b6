// Wa-Tor over row slabs of ranks: the rules of examples/applications/wa_tor (fish and sharks on a torus of Cell
// objects) on several heaps, one per rank, each owning a band of rows plus a halo row above and
// below it. Agents that move into a halo cell migrate to the rank that owns the row
// (soaheap::distributed::migrate, their cell pointers translated through the global cell index),
// and border rows travel between neighbouring ranks with RowHalo. The result is the single-heap
// result for any number of ranks: the self-check compares every cell with the sequential reference
// of examples/applications/wa_tor/rules.cuh.
//
// One phase (fish, then sharks) on each rank:
//  1. halo kinds: the occupants of my first and last rows go to my neighbours' halo cells, so that
//     agents at my border see what is next to them;
//  2. requests: each agent posts its move request (an atomic max) into a neighbour cell, halo
//     cells included;
//  3. halo requests go back to the owners, which combine them with their own (max);
//  4. the winning requests of my border rows go out to the neighbours' halo cells again;
//  5. commit: winners move; one that moves into a halo cell keeps it as its position (a shark that
//     eats there learns it from the halo kind);
//  6. migrate: agents in halo cells (commit recorded them as departures) move to the owners of
//     those cells, which link each arrival into its cell (a shark's prey there is destroyed).
// With one rank there are no halo rows, and the steps are those of examples/applications/wa_tor.
//
// `--ranks N`: N ranks as threads of this process (LocalGroup); `--transport mpi`: one rank per MPI
// process, any number per GPU or none (mpirun -np N wa_tor_slabs --transport mpi); `--transport
// nccl`: one rank per MPI process and GPU, when built with NCCL and MPI.

#include "examples/common/model.cuh"
#include "examples/common/ranks.cuh"
#include "examples/applications/wa_tor/rules.cuh"

#include <soaheap/distributed/migrate.cuh>
#include <soaheap/distributed/row_halo.hpp>
#include <soaheap/soaheap.cuh>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace wator_slabs {

using namespace wator;  // the rules: Rules, hash4, request_key, kinds, Reference
namespace dist = soaheap::distributed;

class Agent;

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes =
      soaheap::fields<soaheap::array<Cell*, kDirections>, Agent*, std::uint64_t, std::uint32_t, std::uint32_t>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> neighbours;
  soaheap::Field<Cell, 1> agent;      ///< the occupant (owned cells only)
  soaheap::Field<Cell, 2> request;    ///< winning move request of the current phase (0: none)
  soaheap::Field<Cell, 3> index;      ///< global y * width + x
  soaheap::Field<Cell, 4> halo_kind;  ///< kHalo bit: a halo cell; low byte: its occupant's kind

  static constexpr std::uint32_t kHalo = 0x100;

  SOAHEAP_HD Cell(std::uint64_t, std::uint32_t global_index, bool halo) {
    for (int d = 0; d < kDirections; ++d) neighbours[d] = nullptr;
    agent = nullptr;
    request = 0;
    index = global_index;
    halo_kind = halo ? kHalo : 0;
  }
  SOAHEAP_HD bool is_halo() const { return (halo_kind & kHalo) != 0; }
  SOAHEAP_HD void reset_request() { request = 0; }
  SOAHEAP_HD std::uint64_t* request_address() { return &static_cast<std::uint64_t&>(request); }
  SOAHEAP_HD std::uint8_t occupant_kind() const;
};

class Agent : public soaheap::Object<Agent> {
 public:
  using FieldTypes = soaheap::fields<Cell*, Cell*, std::uint32_t, std::uint32_t>;
  static constexpr const char* kName = "Agent";
  static constexpr bool kAbstract = true;
  soaheap::Field<Agent, 0> position;
  soaheap::Field<Agent, 1> target;     ///< the cell requested in this phase, or nullptr
  soaheap::Field<Agent, 2> location;   ///< global index of `position`
  soaheap::Field<Agent, 3> breed_age;

  SOAHEAP_HD explicit Agent(Cell* cell) {
    position = cell;
    target = nullptr;
    location = cell->index;
    breed_age = 0;
  }
  /// Requests the neighbour the move rule (wa_tor's rules.cuh) chooses, or none; halo cells count
  /// with the kinds their owners sent.
  SOAHEAP_HD void post_request(std::uint8_t mover, std::uint64_t seed, std::uint64_t iteration) {
    Cell* here = position;
    post_move_request<Cell>(*this, mover, seed, iteration,
                            [&](int d) { return here->neighbours[d]->occupant_kind(); });
  }
  SOAHEAP_HD bool won_target() const { return won_move_request<Cell>(*this); }
};

/// After a migration: an agent its cell does not know yet has just arrived; it takes the cell (a
/// shark's prey there is destroyed: the shark won that cell on its old rank). Fish and Shark call
/// it from their own `settle` (parallel_do calls methods of the visited class).
template <class View>
SOAHEAP_HD void settle_agent(const View& heap, Agent* agent) {
  Cell* cell = agent->position;
  Agent* occupant = cell->agent;
  if (occupant == agent) return;
  if (occupant != nullptr) soaheap::destroy(heap, occupant);
  cell->agent = agent;
}

/// Where commit records an agent that moved into a halo cell: the departures of this phase, bound
/// for the owner of the cell's row (migrate_departures moves them; no survey of every agent).
struct Leaving {
  dist::DepartureList departures;
  dist::RowSlabs slabs;
  std::uint32_t width;
  SOAHEAP_HD void record_if_in_halo(Agent* agent) const {
    Cell* cell = agent->position;
    if (cell->is_halo()) departures.leave(agent, slabs.owner(static_cast<std::uint32_t>(cell->index) / width));
  }
};

class Fish : public soaheap::Object<Fish, Agent> {
 public:
  using FieldTypes = soaheap::fields<>;
  static constexpr const char* kName = "Fish";
  SOAHEAP_HD explicit Fish(Cell* cell) : Object(cell) {}
  template <class View>
  SOAHEAP_HD void settle(const View& heap) {
    settle_agent(heap, this);
  }

  SOAHEAP_HD void request_move(std::uint64_t seed, std::uint64_t iteration) { post_request(kFish, seed, iteration); }

  template <class View>
  SOAHEAP_HD void commit_move(const View& heap, std::uint32_t breed_time, Leaving leaving) {
    breed_age += 1;
    if (!won_target()) return;
    Cell* old_cell = position;
    Cell* new_cell = target;
    if (!new_cell->is_halo()) new_cell->agent = this;  // a halo cell's owner links us after migration
    position = new_cell;
    location = new_cell->index;
    if (breed_age >= breed_time) {
      breed_age = 0;
      old_cell->agent = new (heap) Fish(old_cell);
    } else {
      old_cell->agent = nullptr;
    }
    leaving.record_if_in_halo(this);
  }
};

class Shark : public soaheap::Object<Shark, Agent> {
 public:
  using FieldTypes = soaheap::fields<std::uint32_t>;
  static constexpr const char* kName = "Shark";
  soaheap::Field<Shark, 0> hunger;
  SOAHEAP_HD explicit Shark(Cell* cell) : Object(cell) { hunger = 0; }
  template <class View>
  SOAHEAP_HD void settle(const View& heap) {
    settle_agent(heap, this);
  }

  SOAHEAP_HD void request_move(std::uint64_t seed, std::uint64_t iteration) { post_request(kShark, seed, iteration); }

  template <class View>
  SOAHEAP_HD void commit_move(const View& heap, std::uint32_t breed_time, std::uint32_t starve_time, Leaving leaving) {
    breed_age += 1;
    bool ate = false;
    if (won_target()) {
      Cell* old_cell = position;
      Cell* new_cell = target;
      if (new_cell->is_halo()) {
        ate = new_cell->occupant_kind() == kFish;  // the owner destroys the fish when we arrive
      } else {
        Agent* prey = new_cell->agent;
        if (prey != nullptr) {
          soaheap::destroy(heap, prey);
          ate = true;
        }
        new_cell->agent = this;
      }
      position = new_cell;
      location = new_cell->index;
      if (breed_age >= breed_time) {
        breed_age = 0;
        old_cell->agent = new (heap) Shark(old_cell);
      } else {
        old_cell->agent = nullptr;
      }
    }
    if (ate) {
      hunger = 0;
    } else {
      hunger += 1;
      if (static_cast<std::uint32_t>(hunger) >= starve_time) {
        Cell* cell = position;
        if (!cell->is_halo()) cell->agent = nullptr;
        soaheap::destroy(heap, this);
        return;  // never recorded as leaving
      }
    }
    leaving.record_if_in_halo(this);
  }
};

using SlabHeap = soaheap::Heap<Cell, Agent, Fish, Shark>;
using View = SlabHeap::View;

SOAHEAP_HD inline std::uint8_t Cell::occupant_kind() const {
  if (is_halo()) return static_cast<std::uint8_t>(halo_kind & 0xff);
  Agent* occupant = agent;
  if (occupant == nullptr) return kEmpty;
  return soaheap::detail::class_id_of(soaheap::detail::object_bits_of(occupant)) == View::class_id<Fish> ? kFish : kShark;
}

using Slabs = dist::RowSlabs;

/// A rank's table of cells: with halos, table row 0 is the row above the band and the last table
/// row the one below it; without (one rank), the table is the whole torus.
struct Table {
  Cell** cells;
  std::uint32_t width;
  std::uint32_t height;      ///< of the whole grid
  std::uint32_t rows;        ///< table rows
  std::uint32_t band_first;  ///< first owned global row
  bool halos;
  SOAHEAP_HD std::uint32_t global_row(std::uint32_t table_row) const {
    return halos ? (band_first + height + table_row - 1) % height : table_row;
  }
  SOAHEAP_HD Cell* at(std::uint32_t table_row, std::uint32_t column) const { return cells[table_row * width + column]; }
  SOAHEAP_HD std::uint32_t first_owned() const { return halos ? 1 : 0; }
  SOAHEAP_HD std::uint32_t last_owned() const { return halos ? rows - 2 : rows - 1; }
};

struct MakeCells {
  View heap;
  Table table;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const auto table_row = static_cast<std::uint32_t>(i / table.width);
    const auto column = static_cast<std::uint32_t>(i % table.width);
    const bool halo = table.halos && (table_row == 0 || table_row == table.rows - 1);
    table.cells[i] = new (heap) Cell(i, table.global_row(table_row) * table.width + column, halo);
  }
};

struct LinkNeighbours {
  Table table;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const auto y = static_cast<std::uint32_t>(i / table.width), x = static_cast<std::uint32_t>(i % table.width);
    const std::uint32_t w = table.width, rows = table.rows;
    Cell* cell = table.cells[i];
    if (cell->is_halo()) return;  // halo cells are looked at, never act
    // Owned rows always have a table row above and below (a halo row or, on one rank, the torus).
    cell->neighbours[0] = table.at((y + rows - 1) % rows, x);
    cell->neighbours[1] = table.at(y, (x + 1) % w);
    cell->neighbours[2] = table.at((y + 1) % rows, x);
    cell->neighbours[3] = table.at(y, (x + w - 1) % w);
  }
};

struct Populate {
  View heap;
  Table table;
  std::uint64_t seed;
  Rules rules;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const std::uint32_t table_row = table.first_owned() + static_cast<std::uint32_t>(i / table.width);
    Cell* cell = table.at(table_row, static_cast<std::uint32_t>(i % table.width));
    const std::uint8_t kind = initial_kind(seed, cell->index, rules);
    if (kind == kFish) cell->agent = new (heap) Fish(cell);
    if (kind == kShark) cell->agent = new (heap) Shark(cell);
  }
};

/// Halo step kernels, one thread per column of two rows.
enum class RowValue { kind, request };
struct ExportRows {
  Table table;
  std::uint32_t upper_row, lower_row;  ///< table rows whose values go up and down
  RowValue what;
  std::uint64_t* up;
  std::uint64_t* down;
  SOAHEAP_HD std::uint64_t value(Cell* cell) const {
    return what == RowValue::kind ? cell->occupant_kind() : static_cast<std::uint64_t>(cell->request);
  }
  SOAHEAP_HD void operator()(std::uint64_t x) const {
    const auto column = static_cast<std::uint32_t>(x);
    up[x] = value(table.at(upper_row, column));
    down[x] = value(table.at(lower_row, column));
  }
};
struct ImportRows {
  Table table;
  std::uint32_t upper_row, lower_row;  ///< table rows that receive from above and from below
  RowValue what;
  bool combine;  ///< requests: max with what is there; otherwise overwrite
  const std::uint64_t* from_above;
  const std::uint64_t* from_below;
  SOAHEAP_HD void store(Cell* cell, std::uint64_t value) const {
    if (what == RowValue::kind) {
      cell->halo_kind = Cell::kHalo | static_cast<std::uint32_t>(value);
    } else if (combine) {
      atomic_max(cell->request_address(), value);  // the two rows may be one (a band of one row)
    } else {
      cell->request = value;
    }
  }
  SOAHEAP_HD void operator()(std::uint64_t x) const {
    const auto column = static_cast<std::uint32_t>(x);
    store(table.at(upper_row, column), from_above[x]);
    store(table.at(lower_row, column), from_below[x]);
  }
};

/// Cell pointers cross ranks as global cell indices; the receiver owns the cell.
struct CellLinks {
  Table table;
  SOAHEAP_HD std::uint64_t to_global(const Cell* cell) const { return cell->index; }
  SOAHEAP_HD Cell* to_local(dist::link_type<Cell>, std::uint64_t global) const {
    const auto row = static_cast<std::uint32_t>(global / table.width);
    const std::uint32_t table_row = table.halos ? (row + table.height - table.band_first + 1) % table.height : row;
    if (table_row < table.first_owned() || table_row > table.last_owned()) return nullptr;
    return table.at(table_row, static_cast<std::uint32_t>(global % table.width));
  }
};

/// Each owned cell's state as one word (kind | breed_age << 8 | hunger << 32) at its global index.
struct GatherState {
  Table table;
  std::uint64_t* words;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    const std::uint32_t table_row = table.first_owned() + static_cast<std::uint32_t>(i / table.width);
    Cell* cell = table.at(table_row, static_cast<std::uint32_t>(i % table.width));
    Agent* agent = cell->agent;
    std::uint64_t word = 0;
    if (agent != nullptr) {
      const bool fish = cell->occupant_kind() == kFish;
      word = (fish ? kFish : kShark) | static_cast<std::uint64_t>(static_cast<std::uint32_t>(agent->breed_age)) << 8;
      if (!fish) word |= static_cast<std::uint64_t>(static_cast<std::uint32_t>(static_cast<Shark*>(agent)->hunger)) << 32;
    }
    words[cell->index] = word;
  }
};

struct Options {
  std::uint32_t side = 0;
  int iterations = 0;
  std::uint64_t seed = 0;
  soaheap::Backend backend{};
  Rules rules;
  bool check = true;
};

struct RankResult {
  std::uint64_t fish = 0, sharks = 0;       ///< totals over the ranks
  std::uint64_t conservation_errors = 0;    ///< migrations after which the agent total changed
  std::vector<std::uint64_t> state;         ///< gathered cell words (check runs)
  dist::MigrationStats migration;
  double halo_seconds = 0;
  double total_seconds = 0;
};

class Rank {
 public:
  Rank(const Options& options, dist::Transport& transport)
      : options_(options),
        transport_(transport),
        slabs_{options.side, transport.size()},
        heap_(heap_options(options, transport.size())),
        halo_(transport, options.backend, options.side, 1, true),
        // At most one agent enters each halo cell per phase.
        departures_(options.backend, 2 * std::uint64_t{options.side} + 64) {
    const int rank = transport.rank();
    const bool halos = transport.size() > 1;
    const std::uint32_t first = slabs_.first_row(rank), end = slabs_.first_row(rank + 1);
    if (end <= first)
      throw soaheap::invalid_argument("wa_tor_slabs: " + std::to_string(transport.size()) + " ranks for " +
                                      std::to_string(options.side) + " rows leave rank " + std::to_string(rank) +
                                      " without a row");
    const std::uint32_t rows = (end - first) + (halos ? 2 : 0);
    cells_ = soaheap::detail::Memory(options.backend, std::uint64_t{rows} * options.side * sizeof(Cell*));
    table_ = Table{cells_.as<Cell*>(), options.side, options.side, rows, first, halos};
    heap_.launch(std::uint64_t{rows} * options.side, MakeCells{heap_.view(), table_});
    heap_.launch(std::uint64_t{rows} * options.side, LinkNeighbours{table_});
    heap_.launch(std::uint64_t{end - first} * options.side, Populate{heap_.view(), table_, options.seed, options.rules});
    heap_.synchronize();
  }

  RankResult run() {
    const auto start = std::chrono::steady_clock::now();
    RankResult result;
    result.migration.sent_to.assign(static_cast<std::size_t>(transport_.size()), 0);
    result.migration.received_from.assign(static_cast<std::size_t>(transport_.size()), 0);
    for (int it = 0; it < options_.iterations; ++it) {
      const auto iteration = static_cast<std::uint64_t>(it);
      phase<Fish>(result, [&] { heap_.parallel_do<Fish, &Fish::request_move>(options_.seed, iteration); },
                  [&] {
                    heap_.parallel_do<Fish, &Fish::commit_move<View>>(heap_.view(), options_.rules.fish_breed_time, leaving());
                  });
      phase<Shark>(result, [&] { heap_.parallel_do<Shark, &Shark::request_move>(options_.seed, iteration); },
                   [&] {
                     heap_.parallel_do<Shark, &Shark::commit_move<View>>(heap_.view(), options_.rules.shark_breed_time,
                                                                         options_.rules.shark_starve_time, leaving());
                   });
    }
    heap_.synchronize();
    result.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::uint64_t totals[2] = {heap_.count<Fish>(), heap_.count<Shark>()};
    transport_.all_reduce_sum(totals, 2);
    result.fish = totals[0];
    result.sharks = totals[1];
    if (options_.check) gather_state(result);
    return result;
  }

 private:
  static soaheap::HeapOptions heap_options(const Options& options, int ranks) {
    soaheap::HeapOptions heap_options;
    const std::uint64_t rows = options.side / static_cast<std::uint64_t>(ranks) + 3;
    heap_options.objects = rows * options.side * 8 + 64 * 64;  // room for about three agents per cell, as wa_tor
    heap_options.backend = options.backend;
    return heap_options;
  }

  Leaving leaving() const { return Leaving{departures_.list(), slabs_, options_.side}; }

  template <class Kind, class Request, class Commit>
  void phase(RankResult& result, Request&& request, Commit&& commit) {
    const bool halos = table_.halos;
    const std::uint32_t top = table_.first_owned(), bottom = table_.last_owned();
    if (halos) {  // 1. my border rows' occupants to the neighbours' halo rows
      exchange_rows(result, ExportRows{table_, top, bottom, RowValue::kind, halo_.up(), halo_.down()},
                    ImportRows{table_, 0, table_.rows - 1, RowValue::kind, false, halo_.from_above(), halo_.from_below()});
    }
    heap_.parallel_do<Cell, &Cell::reset_request>();
    request();  // 2.
    if (halos) {
      // 3. requests posted into my halo rows go to their owners, which keep the highest
      exchange_rows(result, ExportRows{table_, 0, table_.rows - 1, RowValue::request, halo_.up(), halo_.down()},
                    ImportRows{table_, top, bottom, RowValue::request, true, halo_.from_above(), halo_.from_below()});
      // 4. the winners of my border rows to the neighbours' halo rows
      exchange_rows(result, ExportRows{table_, top, bottom, RowValue::request, halo_.up(), halo_.down()},
                    ImportRows{table_, 0, table_.rows - 1, RowValue::request, false, halo_.from_above(), halo_.from_below()});
    }
    commit();  // 5.
    if (halos) {  // 6.
      std::uint64_t before[1] = {options_.check ? heap_.count<Kind>() : 0};
      if (options_.check) transport_.all_reduce_sum(before, 1);
      result.migration += dist::migrate_departures<Kind>(heap_, transport_, departures_, CellLinks{table_});
      heap_.parallel_do<Kind, &Kind::template settle<View>>(heap_.view());
      if (options_.check) {
        std::uint64_t after[1] = {heap_.count<Kind>()};
        transport_.all_reduce_sum(after, 1);
        // Migration and settling neither create nor destroy agents of the moving kind (settling
        // destroys only fish eaten by arriving sharks).
        if (after[0] != before[0]) ++result.conservation_errors;
      }
    }
  }

  void exchange_rows(RankResult& result, const ExportRows& out, const ImportRows& in) {
    const auto start = std::chrono::steady_clock::now();
    heap_.launch(options_.side, out);
    heap_.synchronize();
    halo_.exchange();
    heap_.launch(options_.side, in);
    result.halo_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  void gather_state(RankResult& result) {
    const std::uint64_t cells = std::uint64_t{options_.side} * options_.side;
    soaheap::detail::Memory words(options_.backend, cells * sizeof(std::uint64_t));
    words.fill_zero();
    const std::uint32_t owned_rows = table_.last_owned() - table_.first_owned() + 1;
    heap_.launch(std::uint64_t{owned_rows} * options_.side, GatherState{table_, words.as<std::uint64_t>()});
    heap_.synchronize();
    result.state.resize(cells);
    words.copy_to_host(result.state.data(), 0, cells * sizeof(std::uint64_t));
    transport_.all_reduce_sum(result.state.data(), static_cast<int>(cells));
    heap_.validate();
  }

  Options options_;
  dist::Transport& transport_;
  Slabs slabs_;
  SlabHeap heap_;
  dist::RowHalo halo_;
  dist::Departures departures_;
  soaheap::detail::Memory cells_;
  Table table_{};
};

/// Cells whose gathered state differs from the reference's.
std::uint64_t compare(const Options& options, const std::vector<std::uint64_t>& state) {
  const auto reference = soaheap_app::reference_after<Reference>(options.iterations, options.side, options.side,
                                                                 options.seed, options.rules);
  std::uint64_t mismatches = 0;
  for (std::size_t i = 0; i < state.size(); ++i) {
    const ReferenceCell& want = reference.cells()[i];
    const std::uint64_t word = want.kind == kEmpty ? 0
                               : want.kind | static_cast<std::uint64_t>(want.breed_age) << 8 |
                                     (want.kind == kShark ? static_cast<std::uint64_t>(want.hunger) << 32 : 0);
    if (word != state[i]) {
      if (mismatches < 5)
        std::fprintf(stderr, "wa_tor_slabs self-check: cell %zu: reference 0x%llx, ranks 0x%llx\n", i,
                     static_cast<unsigned long long>(word), static_cast<unsigned long long>(state[i]));
      ++mismatches;
    }
  }
  return mismatches;
}

}  // namespace wator_slabs

namespace {

constexpr std::uint32_t kReferenceMaxSide = 512;

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli("Wa-Tor over row slabs of ranks (one heap per rank, agents migrate across slab borders); "
                       "--size is the grid side",
                       soaheap_app::AppDefaults{48, 4096, 60, 500}, soaheap::cuda_available());
  wator_slabs::Options options;
  wator::add_options(cli, options.rules);
  soaheap_app::RankOptions ranks;
  soaheap_app::add_rank_options(cli, ranks);
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions common = cli.options();
  options.side = static_cast<std::uint32_t>(common.size);
  options.iterations = common.iterations;
  options.seed = common.seed;
  options.backend = common.backend;
  options.check = options.side <= kReferenceMaxSide;

  soaheap_app::Result line = soaheap_app::rank_result_line("wa_tor_slabs", options.backend, common);
  bool passed = true;
  const auto figures = soaheap_app::run_ranks(
      ranks, options.backend, argc, argv, line,
      [&](soaheap::distributed::Transport& transport, soaheap_app::Result* rank0_line) -> std::vector<double> {
        wator_slabs::Rank rank(options, transport);
        const wator_slabs::RankResult result = rank.run();
        if (rank0_line != nullptr) {  // totals and the gathered grid are the same on every rank
          soaheap_app::Result& out = *rank0_line;
          out["fish"] = result.fish;
          out["sharks"] = result.sharks;
          if (options.check) {
            const auto check_start = std::chrono::steady_clock::now();
            const std::uint64_t mismatches = wator_slabs::compare(options, result.state);
            out["self_check_mismatches"] = mismatches;
            // Equal fingerprints: equal grids, cell by cell (compares runs on other rank counts or transports).
            std::uint64_t state_fingerprint = 0xcbf29ce484222325ull;
            for (const std::uint64_t word : result.state) state_fingerprint = (state_fingerprint ^ word) * 0x100000001b3ull;
            out["state_fingerprint"] = std::to_string(state_fingerprint);
            out["check_time_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - check_start).count();
            passed = mismatches == 0;
          }
        }
        return {result.total_seconds, static_cast<double>(result.migration.sent),
                static_cast<double>(result.migration.bytes_sent), result.migration.seconds, result.halo_seconds,
                static_cast<double>(result.conservation_errors)};
      });
  if (!figures) return 0;  // an MPI rank other than 0: rank 0 prints
  line["total_time_s"] = soaheap_app::max_over_ranks(*figures, 0);
  soaheap_app::add_rank_lists(line, {"rank_total_time_s", "migrated_objects", "migrated_bytes", "migration_time_s",
                                     "halo_time_s", "conservation_errors"},
                              *figures);
  if (options.check) {
    for (const std::vector<double>& rank : *figures) passed = passed && rank[5] == 0;
  }
  line["self_check"] = options.check ? (passed ? "passed" : "failed") : "skipped";
  line.print();
  return passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return soaheap_app::run_main("wa_tor_slabs", [&] { return run_app(argc, argv); }); }
