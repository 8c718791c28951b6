#pragma once
// The model of the migration tests (migrate_suite.inc on in-process ranks, migrate_nccl_test.cu
// over NCCL, migrate_mpi_test.cu over MPI): an abstract Agent with a translated Cell pointer and an
// untranslatable partner pointer, two concrete subclasses of different sizes, a rank's heap with
// its cells, and the check that every agent arrived once where it was sent.

#include "tests/common/backend_fixture.cuh"

#include <soaheap/distributed/migrate.cuh>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace soaheap_test::migration {


namespace dist = soaheap::distributed;

SOAHEAP_HD inline std::uint64_t mix(std::uint64_t value) {
  value += 0x9e3779b97f4a7c15ull;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ull;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebull;
  return value ^ (value >> 31);
}

class Cell : public soaheap::Object<Cell> {
 public:
  using FieldTypes = soaheap::fields<std::uint32_t>;
  static constexpr const char* kName = "Cell";
  soaheap::Field<Cell, 0> index;
  SOAHEAP_HD explicit Cell(std::uint64_t i) { index = static_cast<std::uint32_t>(i); }
  SOAHEAP_HD void register_in(Cell** table) { table[index] = this; }
};

/// The abstract root: an id, a cell (translated), values, and a partner (never translatable here).
class Agent : public soaheap::Object<Agent> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t, Cell*, soaheap::array<float, 3>, Agent*>;
  static constexpr const char* kName = "Agent";
  static constexpr bool kAbstract = true;
  soaheap::Field<Agent, 0> id;
  soaheap::Field<Agent, 1> cell;
  soaheap::Field<Agent, 2> values;
  soaheap::Field<Agent, 3> partner;
  SOAHEAP_HD Agent(std::uint64_t new_id, Cell* new_cell) {
    id = new_id;
    cell = new_cell;
    for (int e = 0; e < 3; ++e) values[e] = static_cast<float>(new_id) * 0.5f + static_cast<float>(e);
    partner = nullptr;
  }
  /// Records this agent in @p departures when @p rule sends it away from @p rank (migrate_departures).
  template <class Rule>
  SOAHEAP_HD void record_departure(dist::DepartureList departures, Rule rule, int rank) {
    const int target = rule(this);
    if (target != rank) departures.leave(this, target);
  }
  /// Every agent whose id is 3 mod 4 becomes its own partner (the untranslated-pointer test).
  SOAHEAP_HD void partner_self_if_3_mod_4() {
    if (id % 4 == 3) partner = this;
  }
};

/// Objects are made with ids first + 2i (Walker) and first + 2i + 1 (Runner), cell id % cells.
class Walker : public soaheap::Object<Walker, Agent> {
 public:
  using FieldTypes = soaheap::fields<double>;
  static constexpr const char* kName = "Walker";
  soaheap::Field<Walker, 0> weight;
  SOAHEAP_HD Walker(std::uint64_t i, std::uint64_t first, Cell* const* cells, std::uint32_t cell_count)
      : Object(first + 2 * i, cells[(first + 2 * i) % cell_count]) {
    weight = 1.0 / (static_cast<double>(first + 2 * i) + 1.0);
  }
};

class Runner : public soaheap::Object<Runner, Agent> {
 public:
  using FieldTypes = soaheap::fields<std::uint16_t, soaheap::array<std::uint32_t, 5>>;
  static constexpr const char* kName = "Runner";
  soaheap::Field<Runner, 0> tag;
  soaheap::Field<Runner, 1> words;
  SOAHEAP_HD Runner(std::uint64_t i, std::uint64_t first, Cell* const* cells, std::uint32_t cell_count)
      : Object(first + 2 * i + 1, cells[(first + 2 * i + 1) % cell_count]) {
    const std::uint64_t own = first + 2 * i + 1;
    tag = static_cast<std::uint16_t>(own % 65521u);
    for (int k = 0; k < 5; ++k) words[k] = static_cast<std::uint32_t>(own) ^ static_cast<std::uint32_t>(k * 0x01010101u);
  }
};

using MigrationHeap = soaheap::Heap<Cell, Agent, Walker, Runner>;

/// Cell pointers travel as cell indices; a rank resolves only the cells it has.
struct CellLinks {
  Cell* const* cells;
  std::uint32_t count;
  SOAHEAP_HD std::uint64_t to_global(const Cell* cell) const { return cell->index; }
  template <class P>
  SOAHEAP_HD std::uint64_t to_global(const P*) const {
    return dist::kUntranslated;
  }
  SOAHEAP_HD Cell* to_local(dist::link_type<Cell>, std::uint64_t global) const {
    return global < count ? cells[global] : nullptr;
  }
  template <class P>
  SOAHEAP_HD P* to_local(dist::link_type<P>, std::uint64_t) const {
    return nullptr;
  }
};

struct SendAllTo {
  int target;
  SOAHEAP_HD int operator()(Agent*) const { return target; }
};
struct RandomRank {
  std::uint64_t round;
  int ranks;
  SOAHEAP_HD int operator()(Agent* agent) const {
    return static_cast<int>(mix(agent->id ^ (round << 40)) % static_cast<std::uint64_t>(ranks));
  }
};

/// What a host visit sees of one agent.
struct Seen {
  int rank = -1;
  std::string kind;
  std::uint32_t cell = 0;
  bool cell_null = false;
  bool fields_ok = false;
};

/// One rank's heap with its cells and their pointer table.
class RankHeap {
 public:
  /// Room for about @p objects agents.
  RankHeap(soaheap::Backend backend, std::uint64_t objects, std::uint32_t cells)
      : heap_(options(backend, objects)), table_(backend, cells), cell_count_(cells) {
    heap_.parallel_new<Cell>(cells);
    heap_.parallel_do<Cell, &Cell::register_in>(table_.data());
    heap_.synchronize();
    host_table_ = table_.to_host();
  }
  MigrationHeap& heap() { return heap_; }
  CellLinks links() const { return CellLinks{table_.data(), cell_count_}; }
  CellLinks links_for(std::uint32_t resolvable) const { return CellLinks{table_.data(), resolvable}; }
  /// Creates n Walkers and n Runners with ids first..first + 2n - 1.
  void create(std::uint64_t n, std::uint64_t first) {
    heap_.parallel_new<Walker>(n, first, static_cast<Cell* const*>(table_.data()), cell_count_);
    heap_.parallel_new<Runner>(n, first, static_cast<Cell* const*>(table_.data()), cell_count_);
    heap_.synchronize();
  }
  /// Every agent as the host sees it, by id; fields checked against what its constructor wrote.
  void collect(int rank, std::map<std::uint64_t, Seen>& seen, std::vector<std::uint64_t>& duplicates) const {
    const auto visit = [&](const Agent* agent, const char* kind, bool own_fields_ok) {
      const std::uint64_t id = agent->id;
      Seen entry;
      entry.rank = rank;
      entry.kind = kind;
      const Cell* cell = agent->cell;
      entry.cell_null = cell == nullptr;
      entry.cell = cell_index_of(cell);
      bool ok = own_fields_ok && agent->partner.get() == nullptr;
      for (int e = 0; e < 3; ++e) ok = ok && agent->values[e] == static_cast<float>(id) * 0.5f + static_cast<float>(e);
      entry.fields_ok = ok;
      if (!seen.emplace(id, entry).second) duplicates.push_back(id);
    };
    heap_.for_each<Walker>([&](const Walker* w) {
      visit(w, "Walker", w->weight.get() == 1.0 / (static_cast<double>(w->id.get()) + 1.0));
    });
    heap_.for_each<Runner>([&](const Runner* r) {
      const std::uint64_t own = r->id;
      bool ok = r->tag.get() == static_cast<std::uint16_t>(own % 65521u);
      for (int k = 0; k < 5; ++k)
        ok = ok && r->words[k] == (static_cast<std::uint32_t>(own) ^ static_cast<std::uint32_t>(k * 0x01010101u));
      visit(r, "Runner", ok);
    });
  }

 private:
  static soaheap::HeapOptions options(soaheap::Backend backend, std::uint64_t objects) {
    soaheap::HeapOptions result;
    // Blocks hold 64 Cells but only 4 or 5 agents (the smallest class sets the block size).
    result.objects = objects * 16;
    result.backend = backend;
    result.host_threads = 2;
    return result;
  }
  /// The index of the cell a pointer field holds (compared, never followed: on cuda it is a device address).
  std::uint32_t cell_index_of(const Cell* cell) const {
    for (std::uint32_t i = 0; i < host_table_.size(); ++i)
      if (host_table_[i] == cell) return i;
    return 0xffffffffu;
  }

  MigrationHeap heap_;
  TestBuffer<Cell*> table_;
  std::vector<Cell*> host_table_;
  std::uint32_t cell_count_;
};

/// After @p rounds rounds of RandomRank over @p transport: every one of the @p total agents is on
/// exactly one rank, the one the last round chose, with its fields and its cell (of @p cells)
/// intact. Sums over all ranks, so every rank reaches the same verdict.
inline void expect_agents_where_the_last_round_sent_them(const RankHeap& rank_heap, dist::Transport& transport,
                                                         int rounds, std::uint32_t cells, std::uint64_t total) {
  const int rank = transport.rank();
  std::map<std::uint64_t, Seen> seen;
  std::vector<std::uint64_t> duplicates;
  rank_heap.collect(rank, seen, duplicates);
  std::uint64_t wrong = 0, id_sum = 0;
  const RandomRank last_round{static_cast<std::uint64_t>(rounds - 1), transport.size()};
  for (const auto& [id, entry] : seen) {
    const int expected = static_cast<int>(mix(id ^ (last_round.round << 40)) % static_cast<std::uint64_t>(last_round.ranks));
    if (expected != rank || !entry.fields_ok || entry.cell != id % cells) ++wrong;
    id_sum += id;
  }
  std::uint64_t sums[4] = {seen.size(), duplicates.size(), wrong, id_sum};
  transport.all_reduce_sum(sums, 4);
  EXPECT_EQ(sums[0], total);
  EXPECT_EQ(sums[1], 0u);
  EXPECT_EQ(sums[2], 0u) << "agents on the wrong rank, with wrong fields or a wrong cell";
  EXPECT_EQ(sums[3], total * (total - 1) / 2);
}

}  // namespace soaheap_test::migration
