// soaheap_app::Session and the baselines' result line (see harness.hpp).
#include "examples/harness/harness.hpp"

#include <soaheap/core/backend.cuh>
#include <soaheap/profiler/profiler.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

namespace soaheap_app {
namespace {

std::string policy_description(const soaheap::DefragConfig& config) {
  switch (config.policy) {
    case soaheap::DefragPolicyKind::every:
      return "every:" + std::to_string(config.every);
    case soaheap::DefragPolicyKind::mass:
      return "mass:" + nlohmann::json(config.mass_threshold.value).dump() + (config.mass_threshold.is_percent ? "%" : "");
    case soaheap::DefragPolicyKind::automatic:
      return "auto:" + nlohmann::json(100.0 * config.auto_budget).dump() + "%";
    default:
      return "none";
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Before CUDA starts: load every kernel at start-up, so that no module loads inside the timed part.
// A value the user set wins.
const bool kEagerModuleLoading = setenv("CUDA_MODULE_LOADING", "EAGER", 0) == 0;

}  // namespace

struct Session::Impl {
  std::string app;
  AppOptions options;
  HeapDescription heap;
  soaheap::DefragConfig config;
  nlohmann::json summary;
  std::unique_ptr<soaheap::Profiler> profiler;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  double timed_seconds = -1;  ///< setup + iterations; negative until stop_clock()
  double defrag_seconds = 0;
  long long defrag_runs = 0;
  long long iterations_done = 0;
  std::uint64_t blocks_freed = 0;
  long long reorder_runs = 0;   // ordered compactions (objects sorted by a key), among defrag_runs
  double reorder_seconds = 0;   // their GPU time (part of defrag_seconds)
  std::uint64_t objects_moved = 0;
};

Session::Session(std::string app, const AppOptions& options, HeapDescription heap) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.app = std::move(app);
  s.options = options;
  s.heap = std::move(heap);
  // The configuration loader checks per-class settings against the heap's concrete classes.
  std::vector<soaheap::ClassInfo> classes;
  for (const HeapDescription::Class& entry : s.heap.classes)
    if (!entry.abstract) classes.push_back({entry.name, entry.capacity});
  s.config = soaheap::load_defrag_config(
      options.config_file.empty() ? std::nullopt : std::optional<std::string>(options.config_file), classes);
  if (!options.defrag_policy.empty()) soaheap::apply_policy_spec(s.config, options.defrag_policy);
  if (options.defrag_factor != 0) s.config.factor = options.defrag_factor;
  if (options.defrag_locality_window) s.config.locality_window = *options.defrag_locality_window;
  soaheap::validate(s.config, classes);
  s.summary = {{"defrag_policy", policy_description(s.config)},
               {"defrag_factor", s.config.factor},
               {"defrag_locality_window", s.config.locality_window},
               {"retained_candidates", s.config.retained_candidates},
               {"size", options.size},
               {"iterations", options.iterations},
               {"seed", options.seed}};
  if (!options.profile_file.empty()) {
    s.profiler = std::make_unique<soaheap::Profiler>(options.profile_file, s.app, options.profile_interval);
    std::vector<soaheap::Profiler::ProfiledClass> listed;
    for (const HeapDescription::Class& entry : s.heap.classes) listed.push_back({entry.name, entry.capacity, entry.abstract});
    s.profiler->attach(s.heap.backend, s.heap.device, s.heap.heap_bytes, s.heap.block_bytes, listed, s.summary.dump());
  }
}

Session::~Session() = default;

const soaheap::DefragConfig& Session::config() const { return impl_->config; }
const AppOptions& Session::options() const { return impl_->options; }

bool Session::sample_due(long long iterations) const {
  return impl_->profiler && iterations % impl_->profiler->sampling_interval() == 0;
}

void Session::sample(const soaheap::HeapStats& stats, long long iterations) {
  impl_->iterations_done = std::max(impl_->iterations_done, iterations);
  if (impl_->profiler) impl_->profiler->sample_stats(stats, iterations);
}

void Session::record(long long iterations, const std::vector<soaheap::DefragResult>& results, double seconds) {
  Impl& s = *impl_;
  s.iterations_done = std::max(s.iterations_done, iterations);
  s.defrag_seconds += seconds;
  for (const soaheap::DefragResult& result : results) {
    ++s.defrag_runs;
    s.blocks_freed += result.blocks_freed;
    s.objects_moved += result.objects_moved;
    if (result.ordered) {
      ++s.reorder_runs;
      s.reorder_seconds += result.times.total_ms() / 1e3;
    }
    if (s.profiler) s.profiler->record_defrag(iterations, result);
  }
}

double Session::defrag_seconds() const { return impl_->defrag_seconds; }
long long Session::defrag_runs() const { return impl_->defrag_runs; }
double Session::elapsed_seconds() const { return seconds_since(impl_->start); }

void Session::stop_clock() {
  if (impl_->timed_seconds < 0) impl_->timed_seconds = elapsed_seconds();
}
bool Session::clock_stopped() const { return impl_->timed_seconds >= 0; }

int Session::finish(const HeapFigures& heap, bool self_check_passed, const Result& extra) {
  Impl& s = *impl_;
  stop_clock();
  const double check_time_s = elapsed_seconds() - s.timed_seconds;
  Result objects;
  for (const soaheap::ClassStats& entry : heap.stats.classes)
    if (!entry.abstract) objects[entry.name] = entry.used_slots;
  Result line;
  line["app"] = s.app;
  line["backend"] = std::string(soaheap::to_string(s.heap.backend));
  line["size"] = s.options.size;
  line["iterations"] = s.options.iterations;
  line["seed"] = s.options.seed;
  line["defrag_policy"] = s.summary["defrag_policy"].get<std::string>();
  line["defrag_factor"] = s.config.factor;
  line["defrag_locality_window"] = s.config.locality_window;
  line["total_time_s"] = s.timed_seconds;
  line["check_time_s"] = check_time_s;
  line["defrag_time_s"] = s.defrag_seconds;
  line["enumeration_time_s"] = heap.enumeration_seconds;
  line["objects"] = objects;
  line["peak_allocated_blocks"] = heap.peak_allocated_blocks;
  line["allocated_blocks"] = heap.stats.allocated_blocks();
  line["block_bytes"] = s.heap.block_bytes;
  line["heap_bytes"] = s.heap.heap_bytes;
  line["resident_bytes"] = heap.stats.resident_bytes;
  line["scratch_bytes"] = heap.stats.scratch_bytes;
  line["max_bytes"] = heap.stats.max_bytes;
  line["peak_resident_bytes"] = heap.peak_resident_bytes;
  line["resident_after_trim"] = heap.resident_after_trim;
  line["growth_longest_ns"] = heap.longest_growth_ns;
  // cudaMemGetInfo's free bytes at the start, at the fullest and after the final trim (0 on host).
  line["device_free_bytes"] = {heap.device_free_start, heap.device_free_least, heap.device_free_end};
  line["fragmentation"] = heap.stats.fragmentation();
  line["defrag_runs"] = s.defrag_runs;
  line["blocks_freed"] = s.blocks_freed;
  line["objects_moved"] = s.objects_moved;
  line["reorder_runs"] = s.reorder_runs;
  line["reorder_time_s"] = s.reorder_seconds;
  line["self_check"] = self_check_passed ? "passed" : "failed";
  line.merge(extra);
  if (s.profiler) {
    s.profiler->sample_stats(heap.stats, s.iterations_done);
    s.profiler->finish(s.iterations_done, s.timed_seconds, s.defrag_seconds);
  }
  line.print();
  return self_check_passed ? 0 : 1;
}

int finish_baseline(const BaselineResult& result, const AppOptions& options) {
  // What follows the timed part (reading results back, the self-check) is reported separately.
  const double check_time_s = seconds_since(result.start) - result.timed_seconds;
  Result objects;
  for (const auto& [name, count] : result.objects) objects[name] = count;
  Result line;
  line["app"] = result.app;
  line["backend"] = std::string(soaheap::to_string(options.backend));
  line["size"] = options.size;
  line["iterations"] = options.iterations;
  line["seed"] = options.seed;
  line["defrag_policy"] = "none";
  line["defrag_factor"] = 0;
  line["total_time_s"] = result.timed_seconds;
  line["check_time_s"] = check_time_s;
  line["simulation_time_s"] = result.simulation_seconds;
  line["defrag_time_s"] = 0.0;
  line["enumeration_time_s"] = 0.0;
  line["objects"] = objects;
  line["peak_allocated_blocks"] = 0;
  line["allocated_blocks"] = 0;
  line["block_bytes"] = 0;
  line["heap_bytes"] = result.memory_bytes;
  line["fragmentation"] = 0.0;
  line["defrag_runs"] = 0;
  line["blocks_freed"] = 0;
  line["objects_moved"] = 0;
  line["reorder_runs"] = 0;
  line["reorder_time_s"] = 0.0;
  line["self_check"] = result.self_check_passed ? "passed" : "failed";
  line.merge(result.extra);
  line.print();
  return result.self_check_passed ? 0 : 1;
}

}  // namespace soaheap_app
