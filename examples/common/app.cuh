#pragma once
/// @file app.cuh
/// @brief What every example application shares: the common command-line options (size,
///        iterations, seed, backend, defragmentation policy, factor and locality window, configuration file,
///        profile file) and `AppRun`, the per-run bookkeeping (profiler samples, defragmentation
///        policy, peak memory, timings) that ends in the one JSON result line an application prints.
///
/// Usage:
/// @code
///   CLI::App cli{"my app"};
///   soaheap_app::CommonOptions common(cli, {/*host_size*/ 1000, /*cuda_size*/ 1 << 20, 20, 200});
///   CLI11_PARSE(cli, argc, argv);
///   const soaheap_app::AppOptions options = common.finalize();
///   MyHeap heap(soaheap::HeapOptions{.objects = ..., .backend = options.backend});
///   soaheap_app::AppRun<MyHeap> run("my_app", options, heap);
///   for (int i = 0; i < options.iterations; ++i) { step(heap); run.after_iteration(i); }
///   return run.finish(self_check_ok, {{"extra", 1}});
/// @endcode
/// stdout carries only the JSON result line; logs go to stderr.

#include <soaheap/config/defrag_config.hpp>
#include <soaheap/defrag/policy.hpp>
#include <soaheap/profiler/profiler.hpp>
#include <soaheap/soaheap.cuh>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace soaheap_app {

/// @brief Problem size and iteration count an application uses when the user gives none:
///        the papers' sizes on cuda, small ones (a few seconds) on the host backend.
struct AppDefaults {
  std::uint64_t host_size;
  std::uint64_t cuda_size;
  int host_iterations;
  int cuda_iterations;
};

/// @brief The resolved common options of a run.
struct AppOptions {
  std::uint64_t size = 0;        ///< problem size (what it counts is up to the application)
  int iterations = 0;
  std::uint64_t seed = 0;
  soaheap::Backend backend = soaheap::Backend::host;
  std::string defrag_policy;     ///< none|every:M|mass:K2|mass:K2%; empty = the configuration's policy
  int defrag_factor = 0;         ///< n; 0 = configuration / default
  /// Blocks per locality window of the policy's runs (0 = off); unset = the configuration's
  std::optional<long long> defrag_locality_window;
  std::string config_file;       ///< defragmentation configuration (.toml or .json)
  std::string profile_file;      ///< soaheap-profile output; empty = no profile
  int profile_interval = 1;      ///< record one profile sample every this many iterations
};

/// @brief The default backend: cuda when this build can run it on a present GPU, else host.
inline soaheap::Backend default_backend() {
  return soaheap::cuda_available() ? soaheap::Backend::cuda : soaheap::Backend::host;
}

/// @brief Adds `--backend host|cuda` to @p cli, storing into @p backend_name, which it sets to
///        default_backend(). The default depends on the machine, so the help states the one that
///        applies here and why.
inline CLI::Option* add_backend_option(CLI::App& cli, std::string& backend_name) {
  backend_name = std::string(soaheap::to_string(default_backend()));
  const std::string reason = backend_name == "cuda" ? "a GPU is available" : "no GPU is available to this build";
  return cli
      .add_option("--backend", backend_name,
                  "Where the heap lives and kernels run: host or cuda (default here: " + backend_name + ", " + reason +
                      ")")
      ->check(CLI::IsMember({"host", "cuda"}));
}

/// @brief A CLI11 check for whole numbers of at least @p minimum, whose message names the value
///        ("must be at least 1, got 0") rather than a floating-point range.
inline CLI::Validator at_least(long long minimum) {
  return CLI::Validator(
      [minimum](std::string& text) -> std::string {
        long long value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected a whole number, got \"" + text + "\"";
        if (value < minimum) return "must be at least " + std::to_string(minimum) + ", got " + text;
        return {};
      },
      "INT>=" + std::to_string(minimum));
}

/// @brief at_least(1): for counts that must be positive.
inline CLI::Validator at_least_one() { return at_least(1); }

/// @brief Adds the common options to a CLI11 app; `finalize()` after parsing resolves the
///        backend-dependent defaults.
class CommonOptions {
 public:
  static constexpr std::uint64_t kDefaultSeed = 42;

  CommonOptions(CLI::App& cli, AppDefaults defaults) : defaults_(defaults) {
    size_option_ = cli.add_option("--size", size_,
                                  "Problem size (default: " + std::to_string(defaults.cuda_size) + " on cuda, " +
                                      std::to_string(defaults.host_size) + " on host)")
                       ->check(at_least_one());
    iterations_option_ = cli.add_option("--iterations", iterations_,
                                        "Iterations to run (default: " + std::to_string(defaults.cuda_iterations) +
                                            " on cuda, " + std::to_string(defaults.host_iterations) + " on host)")
                             ->check(CLI::NonNegativeNumber);
    cli.add_option("--seed", seed_, "Random seed; a run is deterministic per seed and backend")
        ->capture_default_str();
    add_backend_option(cli, backend_name_);
    cli.add_option("--defrag-policy", defrag_policy_,
                   "When to defragment: none, every:M (every M iterations), mass:K2 (once K2 candidate blocks "
                   "exist) or mass:P% (P percent of the heap's blocks); default: the configuration's policy");
    cli.add_option("--defrag-factor", defrag_factor_,
                   "Defragmentation factor n (merge n+1 blocks into n); overrides the configuration's global "
                   "factor (default: configuration, else 1)")
        ->check(at_least_one());
    locality_window_option_ =
        cli.add_option("--defrag-locality-window", locality_window_,
                       "Blocks per locality window: the policy's runs move objects only within windows of this "
                       "many consecutive blocks, so they stay near their old addresses; 0 = off (default: "
                       "configuration, else 0)")
            ->check(at_least(0));
    cli.add_option("--config", config_file_,
                   "Defragmentation configuration file (.toml or .json, see docs/defrag-config.md); "
                   "SOAHEAP_DEFRAG_* environment variables override it")
        ->check(CLI::ExistingFile);
    cli.add_option("--profile", profile_file_,
                   "Write a memory profile (JSON Lines, see tools/profile/FORMAT.md) to this file");
    cli.add_option("--profile-interval", profile_interval_, "Record one profile sample every this many iterations")
        ->check(at_least_one())
        ->capture_default_str();
  }

  /// @brief The options after parsing, with backend-dependent defaults filled in.
  AppOptions finalize() const {
    AppOptions options;
    options.backend = soaheap::parse_backend(backend_name_);
    const bool on_cuda = options.backend == soaheap::Backend::cuda;
    options.size = size_option_->count() > 0 ? size_ : (on_cuda ? defaults_.cuda_size : defaults_.host_size);
    options.iterations =
        iterations_option_->count() > 0 ? iterations_ : (on_cuda ? defaults_.cuda_iterations : defaults_.host_iterations);
    options.seed = seed_;
    options.defrag_policy = defrag_policy_;
    options.defrag_factor = defrag_factor_;
    if (locality_window_option_->count() > 0) options.defrag_locality_window = locality_window_;
    options.config_file = config_file_;
    options.profile_file = profile_file_;
    options.profile_interval = profile_interval_;
    return options;
  }

 private:
  AppDefaults defaults_;
  CLI::Option* size_option_ = nullptr;
  CLI::Option* iterations_option_ = nullptr;
  std::uint64_t size_ = 0;
  int iterations_ = 0;
  std::uint64_t seed_ = kDefaultSeed;
  std::string backend_name_;
  std::string defrag_policy_;
  int defrag_factor_ = 0;
  CLI::Option* locality_window_option_ = nullptr;
  long long locality_window_ = 0;
  std::string config_file_;
  std::string profile_file_;
  int profile_interval_ = 1;
};

namespace detail {

/// The heap's concrete classes, as the configuration loader checks settings against them.
template <class Heap>
std::vector<soaheap::ClassInfo> managed_classes() {
  std::vector<soaheap::ClassInfo> classes;
  for (int c = 0; c < Heap::kClassCount; ++c) {
    if (Heap::class_is_abstract(c)) continue;
    classes.push_back({Heap::class_name(c), Heap::capacity_of_class(c)});
  }
  return classes;
}

using Policy = soaheap::DefragPolicy;

inline std::string policy_description(const soaheap::DefragConfig& config) {
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

}  // namespace detail

/// @brief Per-run bookkeeping of an application: create it right after the heap, call
///        `after_iteration(i)` at the end of every iteration and `finish(...)` once at the end.
///
/// Loads the defragmentation configuration (file, environment, then --defrag-policy,
/// --defrag-factor and --defrag-locality-window), sets the heap's factors, runs the policy after
/// each iteration, tracks the peak number of allocated blocks, writes the profile (when asked) and
/// times the run.
/// @throw soaheap::config_error for an invalid configuration, policy spec or factor
template <class Heap>
class AppRun {
 public:
  AppRun(const std::string& app_name, const AppOptions& options, Heap& heap)
      : app_name_(app_name), options_(options), heap_(heap), start_(std::chrono::steady_clock::now()) {
    const std::vector<soaheap::ClassInfo> classes = detail::managed_classes<Heap>();
    soaheap::DefragConfig config =
        soaheap::load_defrag_config(options.config_file.empty() ? std::nullopt : std::optional<std::string>(options.config_file),
                                    classes);
    if (!options.defrag_policy.empty()) soaheap::apply_policy_spec(config, options.defrag_policy);
    if (options.defrag_factor != 0) config.factor = options.defrag_factor;
    if (options.defrag_locality_window) config.locality_window = *options.defrag_locality_window;
    soaheap::validate(config, classes);
    for (const soaheap::ClassInfo& info : classes) {
      if (info.capacity < 2) continue;  // a one-slot block is always full: nothing to merge
      heap.set_defrag_factor(Heap::class_id_by_name(info.name), config.factor_for(info.name));
    }
    config_summary_ = {{"defrag_policy", detail::policy_description(config)},
                       {"defrag_factor", config.factor},
                       {"defrag_locality_window", config.locality_window},
                       {"retained_candidates", config.retained_candidates},
                       {"size", options.size},
                       {"iterations", options.iterations},
                       {"seed", options.seed}};
    policy_ = std::make_unique<detail::Policy>(std::move(config));
    if (!options.profile_file.empty()) {
      profiler_ = std::make_unique<soaheap::Profiler>(options.profile_file, app_name, options.profile_interval);
      profiler_->attach(heap, config_summary_);
      profiler_->sample(heap, 0);
    }
  }

  AppRun(const AppRun&) = delete;
  AppRun& operator=(const AppRun&) = delete;

  /// @brief Samples the profile (when one is written), then lets the policy defragment. Without a
  /// profile and with no defragmentation due this waits for nothing: the peak of allocated blocks
  /// is kept on the device by the allocator.
  /// @param iteration the iteration that just ended, from 0
  void after_iteration(long long iteration) {
    iterations_done_ = std::max(iterations_done_, iteration + 1);
    if (profiler_ && (iteration + 1) % profiler_->sampling_interval() == 0)
      profiler_->sample_stats(heap_.stats(), iteration + 1);
    // Operations run asynchronously: let the iteration's kernels finish first, so that the time
    // charged to defragmentation is the policy's own (it waits for the GPU anyway when it looks).
    if (policy_->config().policy != soaheap::DefragPolicyKind::manual) heap_.synchronize();
    const auto defrag_start = std::chrono::steady_clock::now();
    // The policy counts completed iterations, as the profile does: every:M fires after M, 2M, ...
    const std::vector<soaheap::DefragResult> results = policy_->maybe_defrag(heap_, iteration + 1);
    defrag_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - defrag_start).count();
    for (const soaheap::DefragResult& result : results) {
      ++defrag_runs_;
      blocks_freed_ += result.blocks_freed;
      objects_moved_ += result.objects_moved;
      if (profiler_) profiler_->record_defrag(iteration + 1, result);
    }
  }

  /// @brief Seconds spent in defragmentation so far (measured around the policy).
  double defrag_seconds() const { return defrag_seconds_; }
  /// @brief Seconds since this object was created.
  double elapsed_seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  /// @brief Ends the timed part of the run (setup and iterations, what a user's program does):
  /// waits for the GPU and throws errors it recorded. Checks after it are timed separately.
  void stop_clock() {
    if (timed_seconds_ >= 0) return;
    heap_.synchronize();
    timed_seconds_ = elapsed_seconds();
  }
  std::uint64_t peak_allocated_blocks() const { return heap_.peak_allocated_blocks(); }
  long long defrag_runs() const { return defrag_runs_; }

  /// @brief Prints the JSON result line to stdout and closes the profile.
  /// @return the process exit code: 0 iff @p self_check_passed
  int finish(bool self_check_passed, const nlohmann::json& extra = {}) {
    stop_clock();
    const double total_time_s = timed_seconds_;
    const double check_time_s = elapsed_seconds() - timed_seconds_;
    const soaheap::HeapStats stats = heap_.stats();
    const std::uint64_t peak_allocated_blocks = heap_.peak_allocated_blocks();
    nlohmann::json objects = nlohmann::json::object();
    for (const soaheap::ClassStats& entry : stats.classes)
      if (!entry.abstract) objects[entry.name] = entry.used_slots;
    nlohmann::json line = {{"app", app_name_},
                           {"backend", std::string(soaheap::to_string(heap_.backend()))},
                           {"size", options_.size},
                           {"iterations", options_.iterations},
                           {"seed", options_.seed},
                           {"defrag_policy", config_summary_["defrag_policy"]},
                           {"defrag_factor", config_summary_["defrag_factor"]},
                           {"defrag_locality_window", config_summary_["defrag_locality_window"]},
                           {"total_time_s", total_time_s},
                           {"check_time_s", check_time_s},
                           {"defrag_time_s", defrag_seconds_},
                           {"enumeration_time_s", heap_.enumeration_seconds()},
                           {"objects", objects},
                           {"peak_allocated_blocks", peak_allocated_blocks},
                           {"allocated_blocks", stats.allocated_blocks()},
                           {"block_bytes", heap_.block_bytes()},
                           {"heap_bytes", heap_.heap_bytes()},
                           {"fragmentation", stats.fragmentation()},
                           {"defrag_runs", defrag_runs_},
                           {"blocks_freed", blocks_freed_},
                           {"objects_moved", objects_moved_},
                           {"self_check", self_check_passed ? "passed" : "failed"}};
    if (extra.is_object())
      for (const auto& item : extra.items()) line[item.key()] = item.value();
    if (profiler_) {
      profiler_->sample_stats(stats, iterations_done_);
      profiler_->finish(iterations_done_, total_time_s, defrag_seconds_);
    }
    std::cout << line.dump() << std::endl;
    return self_check_passed ? 0 : 1;
  }

 private:
  std::string app_name_;
  AppOptions options_;
  Heap& heap_;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<detail::Policy> policy_;
  std::unique_ptr<soaheap::Profiler> profiler_;
  nlohmann::json config_summary_;
  double timed_seconds_ = -1;  ///< setup + iterations; negative until stop_clock()
  double defrag_seconds_ = 0;
  long long defrag_runs_ = 0;
  long long iterations_done_ = 0;
  std::uint64_t blocks_freed_ = 0;
  std::uint64_t objects_moved_ = 0;
};

/// @brief Runs @p body (which builds the heap, runs and returns the exit code) and turns an
///        exception into a one-line message on stderr and exit code 2.
template <class Body>
int run_main(const char* app_name, Body&& body) {
  try {
    return body();
  } catch (const std::exception& failure) {
    std::cerr << app_name << ": error: " << failure.what() << std::endl;
    return 2;
  }
}

}  // namespace soaheap_app
