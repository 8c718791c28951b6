// soaheap_app::Cli on CLI11 (see harness.hpp).
#include "examples/harness/harness.hpp"

#include <soaheap/core/backend.cuh>

#include <CLI/CLI.hpp>

namespace soaheap_app {
namespace {

/// A CLI11 check for whole numbers of at least @p minimum, whose message names the value
/// ("must be at least 1, got 0") rather than a floating-point range.
CLI::Validator at_least(long long minimum) {
  return CLI::Validator(
      [minimum](std::string& text) -> std::string {
        long long value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected a whole number, got \"" + text + "\"";
        if (value < minimum) return "must be at least " + std::to_string(minimum) + ", got " + text;
        return {};
      },
      "INT>=" + std::to_string(minimum));
}

}  // namespace

struct Cli::Impl {
  explicit Impl(const std::string& description) : app(description) {}
  CLI::App app;
  // The common options (applications only).
  bool common = false;
  AppDefaults defaults{};
  CLI::Option* size_option = nullptr;
  CLI::Option* iterations_option = nullptr;
  CLI::Option* locality_window_option = nullptr;
  std::uint64_t size = 0;
  int iterations = 0;
  std::uint64_t seed = 42;
  std::string backend_name;
  std::string defrag_policy;
  int defrag_factor = 0;
  long long locality_window = 0;
  std::string config_file;
  std::string profile_file;
  int profile_interval = 1;
  std::uint64_t grow_from_mib = 0;
  std::uint64_t heap_mib = 0;
  std::uint64_t max_heap_mib = 0;
};

Cli::Cli(const std::string& description) : impl_(std::make_unique<Impl>(description)) {}

Cli::Cli(const std::string& description, AppDefaults defaults, bool gpu_available) : Cli(description) {
  Impl& c = *impl_;
  c.common = true;
  c.defaults = defaults;
  CLI::App& cli = c.app;
  c.size_option = cli.add_option("--size", c.size,
                                 "Problem size (default: " + std::to_string(defaults.cuda_size) + " on cuda, " +
                                     std::to_string(defaults.host_size) + " on host)")
                      ->check(at_least(1));
  c.iterations_option = cli.add_option("--iterations", c.iterations,
                                       "Iterations to run (default: " + std::to_string(defaults.cuda_iterations) +
                                           " on cuda, " + std::to_string(defaults.host_iterations) + " on host)")
                            ->check(CLI::NonNegativeNumber);
  cli.add_option("--seed", c.seed, "Random seed; a run is deterministic per seed and backend")->capture_default_str();
  backend(c.backend_name, gpu_available);
  cli.add_option("--defrag-policy", c.defrag_policy,
                 "When to defragment: none, every:M (every M iterations), mass:K2 (once K2 candidate blocks "
                 "exist), mass:P% (P percent of the heap's blocks) or auto; default: the configuration's policy");
  cli.add_option("--defrag-factor", c.defrag_factor,
                 "Defragmentation factor n (merge n+1 blocks into n); overrides the configuration's global "
                 "factor (default: configuration, else 1)")
      ->check(at_least(1));
  c.locality_window_option =
      cli.add_option("--defrag-locality-window", c.locality_window,
                     "Blocks per locality window: the policy's runs move objects only within windows of this "
                     "many consecutive blocks, so they stay near their old addresses; 0 = off (default: "
                     "configuration, else 0)")
          ->check(at_least(0));
  cli.add_option("--config", c.config_file,
                 "Defragmentation configuration file (.toml or .json, see docs/defrag-config.md); "
                 "SOAHEAP_DEFRAG_* environment variables override it")
      ->check(CLI::ExistingFile);
  cli.add_option("--profile", c.profile_file,
                 "Write a memory profile (JSON Lines, see tools/profile/FORMAT.md) to this file");
  cli.add_option("--profile-interval", c.profile_interval, "Record one profile sample every this many iterations")
      ->check(at_least(1))
      ->capture_default_str();
  cli.add_option("--grow-from-mib", c.grow_from_mib,
                 "Start the heap at this many MiB and let it grow as the run needs (HeapOptions::max_bytes); "
                 "0 = a fixed heap sized by the application (default)")
      ->check(at_least(0));
  cli.add_option("--max-heap-mib", c.max_heap_mib,
                 "With --grow-from-mib: the most the heap may grow to, in MiB; 0 = the whole memory (default)")
      ->check(at_least(0));
  cli.add_option("--heap-mib", c.heap_mib,
                 "A fixed heap of this many MiB instead of the application's own size (e.g. the peak a growing "
                 "run reached, to compare the two); 0 = the application's size (default)")
      ->check(at_least(0))
      ->excludes("--grow-from-mib");
}

Cli::~Cli() = default;

template <class T>
Cli& Cli::option(const std::string& name, T& value, const std::string& help) {
  CLI::Option* option = impl_->app.add_option(name, value, help);
  if constexpr (std::is_same_v<T, std::vector<int>>) {
    option->delimiter(',');
  } else {
    option->capture_default_str();
  }
  return *this;
}

template <class T>
Cli& Cli::option(const std::string& name, T& value, const std::string& help, typename Same<T>::type minimum,
                 typename Same<T>::type maximum) {
  impl_->app.add_option(name, value, help)->capture_default_str()->check(CLI::Range(minimum, maximum));
  return *this;
}

Cli& Cli::list(const std::string& name, std::vector<int>& values, const std::string& help, int minimum, int maximum) {
  impl_->app.add_option(name, values, help)->delimiter(',')->check(CLI::Range(minimum, maximum));
  return *this;
}

Cli& Cli::choice(const std::string& name, std::string& value, const std::string& help, std::vector<std::string> choices) {
  impl_->app.add_option(name, value, help)->capture_default_str()->check(CLI::IsMember(std::move(choices)));
  return *this;
}

Cli& Cli::flag(const std::string& name, bool& value, const std::string& help) {
  impl_->app.add_flag(name, value, help);
  return *this;
}

Cli& Cli::backend(std::string& name, bool gpu_available) {
  name = gpu_available ? "cuda" : "host";
  const std::string reason = gpu_available ? "a GPU is available" : "no GPU is available to this build";
  impl_->app
      .add_option("--backend", name,
                  "Where the heap lives and kernels run: host or cuda (default here: " + name + ", " + reason + ")")
      ->check(CLI::IsMember({"host", "cuda"}));
  return *this;
}

std::optional<int> Cli::parse(int argc, char** argv) {
  try {
    impl_->app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return impl_->app.exit(error);
  }
  return std::nullopt;
}

AppOptions Cli::options() const {
  const Impl& c = *impl_;
  AppOptions options;
  if (!c.common) return options;
  options.backend = soaheap::parse_backend(c.backend_name);
  const bool on_cuda = options.backend == soaheap::Backend::cuda;
  options.size = c.size_option->count() > 0 ? c.size : (on_cuda ? c.defaults.cuda_size : c.defaults.host_size);
  options.iterations = c.iterations_option->count() > 0 ? c.iterations
                                                        : (on_cuda ? c.defaults.cuda_iterations : c.defaults.host_iterations);
  options.seed = c.seed;
  options.defrag_policy = c.defrag_policy;
  options.defrag_factor = c.defrag_factor;
  if (c.locality_window_option->count() > 0) options.defrag_locality_window = c.locality_window;
  options.config_file = c.config_file;
  options.profile_file = c.profile_file;
  options.profile_interval = c.profile_interval;
  options.heap_start_bytes = c.grow_from_mib << 20;
  options.heap_max_bytes = c.max_heap_mib << 20;
  options.heap_fixed_bytes = c.heap_mib << 20;
  return options;
}

// The option types the applications use.
template Cli& Cli::option(const std::string&, int&, const std::string&);
template Cli& Cli::option(const std::string&, unsigned&, const std::string&);
template Cli& Cli::option(const std::string&, long long&, const std::string&);
template Cli& Cli::option(const std::string&, unsigned long&, const std::string&);
template Cli& Cli::option(const std::string&, unsigned long long&, const std::string&);
template Cli& Cli::option(const std::string&, float&, const std::string&);
template Cli& Cli::option(const std::string&, double&, const std::string&);
template Cli& Cli::option(const std::string&, std::string&, const std::string&);
template Cli& Cli::option(const std::string&, std::vector<int>&, const std::string&);
template Cli& Cli::option(const std::string&, int&, const std::string&, int, int);
template Cli& Cli::option(const std::string&, unsigned&, const std::string&, unsigned, unsigned);
template Cli& Cli::option(const std::string&, long long&, const std::string&, long long, long long);
template Cli& Cli::option(const std::string&, unsigned long&, const std::string&, unsigned long, unsigned long);
template Cli& Cli::option(const std::string&, unsigned long long&, const std::string&, unsigned long long,
                          unsigned long long);
template Cli& Cli::option(const std::string&, float&, const std::string&, float, float);
template Cli& Cli::option(const std::string&, double&, const std::string&, double, double);

}  // namespace soaheap_app
