#pragma once
/// @file harness.hpp
/// @brief The host side of every example application, baseline and benchmark: command-line
///        options, the JSON result line, the defragmentation configuration, the profile file and
///        the run's clock. Compiled once by the C++ compiler into `soaheap_app` (CLI11,
///        nlohmann-json and the profiler stay inside it); this header is plain C++, so the
///        applications' CUDA translation units see only their kernels, their model classes and
///        soaheap's device headers. `examples/common/app.cuh` joins it to a heap (AppRun).

#include <soaheap/config/defrag_config.hpp>
#include <soaheap/core/stats.hpp>
#include <soaheap/defrag/defrag_options.hpp>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace soaheap {
enum class Backend;  // soaheap/core/backend.cuh
}

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
  soaheap::Backend backend{};
  std::string defrag_policy;     ///< none|every:M|mass:K2|mass:K2%|auto; empty = the configuration's policy
  int defrag_factor = 0;         ///< n; 0 = configuration / default
  /// Blocks per locality window of the policy's runs (0 = off); unset = the configuration's
  std::optional<long long> defrag_locality_window;
  std::string config_file;       ///< defragmentation configuration (.toml or .json)
  std::string profile_file;      ///< soaheap-profile output; empty = no profile
  int profile_interval = 1;      ///< record one profile sample every this many iterations
  std::uint64_t heap_start_bytes = 0;  ///< a growing heap starts with this many bytes; 0 = the app's fixed heap
  std::uint64_t heap_max_bytes = 0;    ///< ... and grows to at most this many (0: the whole memory)
  std::uint64_t heap_fixed_bytes = 0;  ///< a fixed heap of this many bytes instead of the app's own size (0: the app's)
};

/// @brief A JSON object built key by key (`line["fish"] = 12; line["grid"] = {64, 64};`), printed
///        as one line. Values: numbers, booleans, strings, lists of numbers and nested objects.
class Result {
 public:
  /// The value under one key; assigning stores it.
  class Entry {
   public:
    template <class T>
    Entry& operator=(const T& value) {
      if constexpr (std::is_same_v<T, bool>) {
        result_.set_bool(key_, value);
      } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
        result_.set_integer(key_, static_cast<long long>(value));
      } else if constexpr (std::is_integral_v<T>) {
        result_.set_unsigned(key_, static_cast<unsigned long long>(value));
      } else if constexpr (std::is_floating_point_v<T>) {
        result_.set_real(key_, static_cast<double>(value));
      } else if constexpr (std::is_same_v<T, Result>) {
        result_.set_object(key_, value);
      } else if constexpr (std::is_same_v<T, std::vector<Result>>) {
        result_.set_objects(key_, value);
      } else if constexpr (std::is_same_v<T, std::vector<double>>) {
        result_.set_reals(key_, value);
      } else if constexpr (std::is_same_v<T, std::vector<int>>) {
        result_.set_numbers(key_, std::vector<unsigned long long>(value.begin(), value.end()));
      } else {
        result_.set_text(key_, std::string(value));
      }
      return *this;
    }
    /// A list of counts, e.g. a grid's sides.
    Entry& operator=(std::initializer_list<unsigned long long> values) {
      result_.set_numbers(key_, std::vector<unsigned long long>(values));
      return *this;
    }

   private:
    friend class Result;
    Entry(Result& result, std::string key) : result_(result), key_(std::move(key)) {}
    Result& result_;
    std::string key_;
  };

  Result();
  ~Result();
  Result(const Result& other);
  Result& operator=(const Result& other);

  Entry operator[](std::string key) { return Entry(*this, std::move(key)); }
  /// Copies every key of @p other into this object (later keys win).
  void merge(const Result& other);
  bool contains(const std::string& key) const;
  /// The number stored under @p key (0 when it is missing or not a number).
  double number(const std::string& key) const;
  std::string dump() const;
  /// Writes the line to stdout.
  void print() const;

 private:
  void set_bool(const std::string& key, bool value);
  void set_integer(const std::string& key, long long value);
  void set_unsigned(const std::string& key, unsigned long long value);
  void set_real(const std::string& key, double value);
  void set_text(const std::string& key, const std::string& value);
  void set_numbers(const std::string& key, const std::vector<unsigned long long>& values);
  void set_reals(const std::string& key, const std::vector<double>& values);
  void set_object(const std::string& key, const Result& value);
  void set_objects(const std::string& key, const std::vector<Result>& values);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// @brief The command line of a program: its own options plus, for applications, the common ones
///        (size, iterations, seed, backend, defragmentation policy, factor and locality window,
///        configuration file, profile). Wraps CLI11.
class Cli {
  template <class T>
  struct Same {  // keeps the bounds of option() from deducing T
    using type = T;
  };

 public:
  /// A program with only its own options.
  explicit Cli(const std::string& description);
  /// An application: the common options with @p defaults; the default backend is cuda when
  /// @p gpu_available, else host.
  Cli(const std::string& description, AppDefaults defaults, bool gpu_available);
  ~Cli();
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;

  /// Adds `--name value` stored into @p value; its current value is the default shown in --help.
  /// T: int, unsigned, long long, unsigned long long, unsigned long, float, double, std::string,
  /// std::vector<int> (comma-separated).
  template <class T>
  Cli& option(const std::string& name, T& value, const std::string& help);
  /// The same with a range check [minimum, maximum]; an error names the value that is out of it.
  template <class T>
  Cli& option(const std::string& name, T& value, const std::string& help, typename Same<T>::type minimum,
              typename Same<T>::type maximum);
  /// `--name a,b,c`: whole numbers in [minimum, maximum].
  Cli& list(const std::string& name, std::vector<int>& values, const std::string& help, int minimum, int maximum);
  /// `--name value` where value must be one of @p choices.
  Cli& choice(const std::string& name, std::string& value, const std::string& help, std::vector<std::string> choices);
  /// `--name` without a value sets @p value.
  Cli& flag(const std::string& name, bool& value, const std::string& help);
  /// `--backend host|cuda` into @p name, with the default for @p gpu_available.
  Cli& backend(std::string& name, bool gpu_available);

  /// Parses the command line. @return the exit code when the program should stop now (0 after
  /// --help, non-zero after an error, whose message is printed), else nothing.
  std::optional<int> parse(int argc, char** argv);
  /// The common options after parse(), with backend-dependent defaults filled in.
  AppOptions options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// @brief What the host side of a run needs to know about its heap.
struct HeapDescription {
  struct Class {
    std::string name;
    int capacity = 0;
    bool abstract = false;
  };
  soaheap::Backend backend{};
  std::string device;  ///< the GPU's or the host's description (profile header)
  std::uint64_t heap_bytes = 0;
  std::uint64_t block_bytes = 0;
  std::vector<Class> classes;
};

/// @brief The host side of AppRun: the defragmentation configuration of the run (file,
///        environment, then the command line), the profile file, the clock and the result line.
class Session {
 public:
  /// @throw soaheap::config_error for an invalid configuration, policy spec or factor
  Session(std::string app, const AppOptions& options, HeapDescription heap);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const soaheap::DefragConfig& config() const;
  const AppOptions& options() const;
  /// Whether the profile wants a sample after @p iterations completed iterations.
  bool sample_due(long long iterations) const;
  void sample(const soaheap::HeapStats& stats, long long iterations);
  /// Adds the runs of one policy call after @p iterations completed iterations, and its time.
  void record(long long iterations, const std::vector<soaheap::DefragResult>& results, double seconds);
  double defrag_seconds() const;
  long long defrag_runs() const;
  /// Seconds since the session started.
  double elapsed_seconds() const;
  /// Ends the timed part (setup and iterations); later work counts as check time.
  void stop_clock();
  bool clock_stopped() const;

  /// What finish() reports about the heap.
  struct HeapFigures {
    soaheap::HeapStats stats;
    std::uint64_t peak_allocated_blocks = 0;
    std::uint64_t peak_resident_bytes = 0;    ///< the most the heap held at an iteration's end
    std::uint64_t resident_before_trim = 0;   ///< a growing heap at the end, before and after soaheap::trim
    std::uint64_t resident_after_trim = 0;
    std::uint64_t longest_growth_ns = 0;      ///< the longest answer to a kernel that waited for growth
    /// The device's free memory (cudaMemGetInfo; host: 0) at the start, the least seen at an
    /// iteration's end, and after the final trim: the heap's saving as the rest of the GPU sees it.
    std::uint64_t device_free_start = 0;
    std::uint64_t device_free_least = 0;
    std::uint64_t device_free_end = 0;
    double enumeration_seconds = 0;
  };
  /// Prints the JSON result line (with @p extra's keys last) and closes the profile.
  /// @return the exit code: 0 iff @p self_check_passed
  int finish(const HeapFigures& heap, bool self_check_passed, const Result& extra);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// @brief What a baseline measured, besides its own figures (`extra`). A baseline is a
///        hand-written SOA program that solves an application's problem without the heap; its line
///        carries the keys of an application's line, with the heap-only figures at zero, so that
///        soaheap-bench can put a baseline and its application side by side.
struct BaselineResult {
  std::string app;                                    ///< program name, the "app" key
  std::chrono::steady_clock::time_point start;        ///< when the run started
  double timed_seconds = 0;                           ///< setup and iterations: total_time_s
  double simulation_seconds = 0;                      ///< time in the iteration loop
  std::vector<std::pair<std::string, std::uint64_t>> objects;  ///< live objects per class name at the end
  std::uint64_t memory_bytes = 0;                     ///< memory the baseline allocated for its arrays
  bool self_check_passed = false;
  Result extra;                                       ///< the baseline's own keys, added last
};

/// @brief Prints @p result's JSON line to stdout.
/// @return the process exit code: 0 iff the self-check passed
int finish_baseline(const BaselineResult& result, const AppOptions& options);

/// @brief A one-line error on stderr for a program that failed with @p what; exit code 2.
int report_failure(const char* program, const char* what);

/// @brief Runs @p body (which returns the exit code) and turns an exception into a one-line
///        message on stderr and exit code 2.
template <class Body>
int run_main(const char* program, Body&& body) {
  try {
    return body();
  } catch (const std::exception& failure) {
    return report_failure(program, failure.what());
  }
}

}  // namespace soaheap_app
