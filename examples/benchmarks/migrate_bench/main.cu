// Migration benchmark: every rank holds objects/ranks Item objects (40 bytes, like a particle);
// each iteration updates every item once (a streaming parallel_do, the iteration's own work) and
// then migrates a given fraction of them, chosen by a counter-based hash of (id, iteration), to
// the next rank. Prints one JSON line: the time of the work and of the migrations, their share of
// the iteration, and objects and bytes moved per rank. The item count is checked after every
// migration (sum over the ranks) and the ids' sum at the end.
//
// `--departures`: the work kernel records the leavers and migrate_departures moves them, instead of
// migrate asking every item its destination.
// `--ranks N` runs N ranks as threads of this process (on one GPU they share it: the figures then
// include both ranks' work); `--transport mpi` one rank per MPI process (several may share a GPU),
// `--transport nccl` one rank per MPI process and GPU.

#include "examples/common/counter_hash.cuh"
#include "examples/common/ranks.cuh"

#include <soaheap/distributed/migrate.cuh>
#include <soaheap/soaheap.cuh>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace migrate_bench {

namespace dist = soaheap::distributed;

class Item : public soaheap::Object<Item> {
 public:
  using FieldTypes = soaheap::fields<std::uint64_t, soaheap::array<double, 3>, float, std::uint32_t>;
  static constexpr const char* kName = "Item";
  soaheap::Field<Item, 0> id;
  soaheap::Field<Item, 1> position;
  soaheap::Field<Item, 2> weight;
  soaheap::Field<Item, 3> tag;

  SOAHEAP_HD Item(std::uint64_t i, std::uint64_t first) {
    id = first + i;
    for (int k = 0; k < 3; ++k) position[k] = static_cast<double>(i) * (k + 1);
    weight = 1.0f;
    tag = static_cast<std::uint32_t>(i);
  }
  /// The iteration's work: reads and writes every field but the id once.
  SOAHEAP_HD void advance(double step) {
    for (int k = 0; k < 3; ++k) position[k] = position[k] * 0.999 + step;
    weight = weight * 0.9999f + 1e-4f;
    tag = tag + 1;
  }
  /// The same work, recording the item in @p departures when @p rule sends it away
  /// (--departures: migrate_departures then needs no survey).
  template <class Rule>
  SOAHEAP_HD void advance_and_record(double step, Rule rule, dist::DepartureList departures, int rank) {
    advance(step);
    const int target = rule(this);
    if (target != rank) departures.leave(this, target);
  }
};

using BenchHeap = soaheap::Heap<Item>;

/// Sends a fraction (in millionths) of the items to the next rank.
struct NextRankSometimes {
  std::uint64_t iteration;
  std::uint64_t millionths;
  int rank;
  int ranks;
  SOAHEAP_HD int operator()(Item* item) const {
    const std::uint64_t roll = soaheap_app::hash4(iteration, 7, item->id, 0) % 1000000u;
    return roll < millionths ? (rank + 1) % ranks : rank;
  }
};

struct Options {
  std::uint64_t objects = 0;
  int iterations = 0;
  double fraction = 0;
  soaheap::Backend backend{};
  dist::MigrationOptions migration;
  bool record_departures = false;  ///< the work kernel records leavers; migrate_departures moves them
};

struct RankResult {
  double work_seconds = 0;
  double migration_seconds = 0;
  double setup_seconds = 0;
  dist::MigrationStats migration;
  std::uint64_t count_errors = 0;
  std::uint64_t id_sum = 0;  ///< summed over the ranks
  std::uint64_t items = 0;   ///< summed over the ranks
};

RankResult run_rank(const Options& options, dist::Transport& transport) {
  using clock = std::chrono::steady_clock;
  const auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  const auto start = clock::now();
  const int rank = transport.rank(), ranks = transport.size();
  const std::uint64_t share = options.objects / static_cast<std::uint64_t>(ranks);
  soaheap::HeapOptions heap_options;
  heap_options.backend = options.backend;
  // Room for the share and what arrives before the share's own leavers are freed.
  heap_options.objects = share + share / 8 + static_cast<std::uint64_t>(options.fraction * 2 * static_cast<double>(share)) + 64 * 64;
  BenchHeap heap(heap_options);
  heap.parallel_new<Item>(share, static_cast<std::uint64_t>(rank) * share);
  heap.synchronize();
  RankResult result;
  result.setup_seconds = seconds_since(start);
  result.migration.sent_to.assign(static_cast<std::size_t>(ranks), 0);
  result.migration.received_from.assign(static_cast<std::size_t>(ranks), 0);
  const auto millionths = static_cast<std::uint64_t>(options.fraction * 1e6 + 0.5);
  std::optional<dist::Departures> departures;
  if (options.record_departures)
    departures.emplace(options.backend, 2 * static_cast<std::uint64_t>(options.fraction * static_cast<double>(share)) + 1024);
  for (int it = 0; it < options.iterations; ++it) {
    const NextRankSometimes rule{static_cast<std::uint64_t>(it), millionths, rank, ranks};
    const auto work_start = clock::now();
    if (departures) {
      heap.parallel_do<Item, &Item::advance_and_record<NextRankSometimes>>(1e-3, rule, departures->list(), rank);
    } else {
      heap.parallel_do<Item, &Item::advance>(1e-3);
    }
    heap.synchronize();
    result.work_seconds += seconds_since(work_start);
    const dist::MigrationStats step =
        departures ? dist::migrate_departures<Item>(heap, transport, *departures, dist::NoLinks{}, options.migration)
                   : dist::migrate<Item>(heap, transport, rule, dist::NoLinks{}, options.migration);
    result.migration_seconds += step.seconds;
    result.migration += step;
  }
  // Checks (not timed): the item count after the run and the ids' sum.
  std::uint64_t totals[2] = {heap.count<Item>(), 0};
  heap.for_each<Item>([&](const Item* item) { totals[1] += item->id; });
  transport.all_reduce_sum(totals, 2);
  result.items = totals[0];
  result.id_sum = totals[1];
  return result;
}

}  // namespace migrate_bench

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli("Migration benchmark: a fraction of the objects moves to the next rank every iteration");
  migrate_bench::Options options;
  options.objects = 1 << 20;
  options.iterations = 20;
  options.fraction = 0.01;
  std::string backend_name;
  soaheap_app::RankOptions ranks;
  ranks.ranks = 2;
  std::string line_placement;
  cli.option("--objects", options.objects, "objects over all ranks", 1ul, 1ul << 34);
  cli.option("--iterations", options.iterations, "iterations", 1, 100000);
  cli.option("--fraction", options.fraction, "fraction of each rank's objects that migrates per iteration", 0.0, 1.0);
  std::string placement = "holes";
  cli.choice("--placement", placement, "where arrivals go: holes (free slots of the class's blocks) or blocks (fresh blocks)",
             {"holes", "blocks"});
  cli.flag("--departures", options.record_departures,
           "the work kernel records the leaving items and migrate_departures moves them (no survey of every item)");
  soaheap_app::add_rank_options(cli, ranks);
  cli.backend(backend_name, soaheap::cuda_available());
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  options.backend = soaheap::parse_backend(backend_name);
  options.migration.placement = placement == "blocks" ? soaheap::distributed::MigrationPlacement::fresh_blocks
                                                      : soaheap::distributed::MigrationPlacement::fill_holes;
  line_placement = placement;

  soaheap_app::Result line;
  line["app"] = "migrate_bench";
  line["backend"] = backend_name;
  bool passed = false;
  const auto figures = soaheap_app::run_ranks(
      ranks, options.backend, argc, argv, line,
      [&](soaheap::distributed::Transport& transport, soaheap_app::Result* rank0_line) -> std::vector<double> {
        const migrate_bench::RankResult r = migrate_bench::run_rank(options, transport);
        if (rank0_line != nullptr) {  // the checks' sums are the same on every rank
          const std::uint64_t total = options.objects / static_cast<std::uint64_t>(transport.size()) *
                                      static_cast<std::uint64_t>(transport.size());
          (*rank0_line)["objects"] = total;
          passed = r.items == total && r.id_sum == total * (total - 1) / 2;
        }
        const double iterations = options.iterations;
        return {r.work_seconds / iterations, r.migration_seconds / iterations,
                r.migration_seconds / std::max(1e-12, r.work_seconds + r.migration_seconds),
                static_cast<double>(r.migration.sent) / iterations, static_cast<double>(r.migration.bytes_sent) / iterations,
                static_cast<double>(r.migration.host_syncs) / iterations};
      });
  if (!figures) return 0;  // an MPI rank other than 0: rank 0 prints
  line["iterations"] = options.iterations;
  line["fraction"] = options.fraction;
  line["placement"] = line_placement;
  line["departures"] = options.record_departures;
  soaheap_app::add_rank_lists(line, {"work_s_per_iteration", "migration_s_per_iteration", "migration_share",
                                     "sent_per_iteration", "bytes_per_iteration", "host_syncs_per_step"},
                              *figures);
  line["self_check"] = passed ? "passed" : "failed";
  line.print();
  return passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return soaheap_app::run_main("migrate_bench", [&] { return run_app(argc, argv); }); }
