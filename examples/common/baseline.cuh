#pragma once
/// @file baseline.cuh
/// @brief What every baseline shares: its kernel launcher and its JSON result line. A baseline
///        is a hand-written SOA program that solves an application's problem without the heap; its
///        line carries the keys `AppRun::finish` writes, with the heap-only figures (blocks,
///        fragmentation, defragmentation) at zero, so that soaheap-bench can put a baseline and its
///        soaheap application side by side.

#include "app.cuh"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/thread_pool.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>

namespace soaheap_app {

/// @brief The kernel launcher of a baseline on @p backend, with the host thread pool it needs
///        (kept in @p pool, which must outlive it).
/// @throw soaheap::usage_error naming @p app for the cuda backend without a GPU
inline soaheap::detail::Executor baseline_executor(soaheap::Backend backend, const std::string& app,
                                                   std::unique_ptr<soaheap::detail::ThreadPool>& pool) {
  soaheap::detail::Executor executor;
  executor.backend = backend;
  if (backend == soaheap::Backend::host) {
    pool = std::make_unique<soaheap::detail::ThreadPool>(0);
    executor.pool = pool.get();
  } else if (!soaheap::cuda_available()) {
    throw soaheap::usage_error(app + ": the cuda backend needs a CUDA GPU, and none is available");
  }
  return executor;
}

/// @brief What a baseline measured, besides its own figures (`extra`).
struct BaselineResult {
  std::string app;                                    ///< program name, the "app" key
  std::chrono::steady_clock::time_point start;        ///< when the run started
  double timed_seconds = 0;                           ///< setup and iterations, up to the synchronization
                                                      ///< after the last kernel: total_time_s
  double simulation_seconds = 0;                      ///< time in the iteration loop
  nlohmann::json objects = nlohmann::json::object();  ///< live objects per class name at the end
  std::uint64_t memory_bytes = 0;                     ///< memory the baseline allocated for its arrays
  bool self_check_passed = false;
  nlohmann::json extra = nlohmann::json::object();    ///< the baseline's own keys, added last
};

/// @brief Prints @p result's JSON line to stdout.
/// @return the process exit code: 0 iff the self-check passed
inline int finish_baseline(const BaselineResult& result, soaheap::Backend backend, const AppOptions& options) {
  // What follows the timed part (reading results back, the self-check) is reported separately.
  const double check_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - result.start).count() - result.timed_seconds;
  nlohmann::json line = {{"app", result.app},
                         {"backend", std::string(soaheap::to_string(backend))},
                         {"size", options.size},
                         {"iterations", options.iterations},
                         {"seed", options.seed},
                         {"defrag_policy", "none"},
                         {"defrag_factor", 0},
                         {"total_time_s", result.timed_seconds},
                         {"check_time_s", check_time_s},
                         {"simulation_time_s", result.simulation_seconds},
                         {"defrag_time_s", 0.0},
                         {"enumeration_time_s", 0.0},
                         {"objects", result.objects},
                         {"peak_allocated_blocks", 0},
                         {"allocated_blocks", 0},
                         {"block_bytes", 0},
                         {"heap_bytes", result.memory_bytes},
                         {"fragmentation", 0.0},
                         {"defrag_runs", 0},
                         {"blocks_freed", 0},
                         {"objects_moved", 0},
                         {"self_check", result.self_check_passed ? "passed" : "failed"}};
  for (const auto& item : result.extra.items()) line[item.key()] = item.value();
  std::cout << line.dump() << std::endl;
  return result.self_check_passed ? 0 : 1;
}

}  // namespace soaheap_app
