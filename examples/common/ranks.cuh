#pragma once
/// @file ranks.cuh
/// @brief The ranks of the distributed examples (particles, wa_tor_slabs, migrate_bench): the
///        options `--ranks N` (N threads of this process, LocalGroup), `--transport mpi` (one rank
///        per MPI process: any number of processes per GPU, or none on the host backend) and
///        `--transport nccl` (one MPI process per GPU), running each rank's part of the program, and
///        bringing every rank's figures to the process that prints the result line.

#include "examples/harness/harness.hpp"

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/distributed/local_group.hpp>
#if SOAHEAP_HAS_MPI
#include <soaheap/distributed/mpi_transport.hpp>
#endif
#if SOAHEAP_HAS_NCCL
#include <soaheap/distributed/nccl_transport.hpp>
#endif

#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace soaheap_app {

struct RankOptions {
  int ranks = 1;
  std::string transport = "local";
  double timeout_seconds = 0;  ///< MpiTransport's bound of every wait; 0: SOAHEAP_MPI_TIMEOUT or its default
};

inline void add_rank_options(Cli& cli, RankOptions& options) {
  cli.option("--ranks", options.ranks, "in-process ranks (transport local)", 1, 64);
  cli.choice("--transport", options.transport,
             "local: --ranks threads of this process; mpi: one rank per MPI process, any number per GPU or none "
             "(mpirun -np N ...); nccl: one rank per MPI process and GPU",
             {"local", "mpi", "nccl"});
  cli.option("--transport-timeout", options.timeout_seconds,
             "seconds any wait of --transport mpi may take before it fails (0: SOAHEAP_MPI_TIMEOUT, else 300)", 0.0, 1e6);
}

/// @brief The result line of an application run on ranks: its name, backend, size, iterations
/// and seed (run_ranks adds transport and ranks).
inline Result rank_result_line(const char* app, soaheap::Backend backend, const AppOptions& common) {
  Result line;
  line["app"] = app;
  line["backend"] = std::string(soaheap::to_string(backend));
  line["size"] = common.size;
  line["iterations"] = common.iterations;
  line["seed"] = common.seed;
  return line;
}

/// @brief Runs body(transport, line) on every rank; body returns the rank's figures (the same
/// count on every rank). @p line is given to rank 0's body only (nullptr elsewhere): keys that only
/// one rank needs to add (checks against a reference). Returns every rank's figures, in rank
/// order, on the process that prints the result line; nothing on the other MPI processes.
template <class Body>
std::optional<std::vector<std::vector<double>>> run_ranks(const RankOptions& options, soaheap::Backend backend,
                                                          int& argc, char**& argv, Result& line, Body body) {
  line["transport"] = options.transport;
  // One rank per process: every rank's figures into its own slots of a sum (the others add zeros,
  // so the bits arrive intact); rank 0 gets them all.
  const auto gather = [&](soaheap::distributed::Transport& transport,
                          const std::vector<double>& mine) -> std::optional<std::vector<std::vector<double>>> {
    const std::size_t count = mine.size();
    std::vector<std::uint64_t> slots(count * static_cast<std::size_t>(transport.size()), 0);
    std::memcpy(slots.data() + count * static_cast<std::size_t>(transport.rank()), mine.data(), count * sizeof(double));
    transport.all_reduce_sum(slots.data(), static_cast<int>(slots.size()));
    line["ranks"] = transport.size();
    if (transport.rank() != 0) return std::nullopt;
    std::vector<std::vector<double>> all(static_cast<std::size_t>(transport.size()), std::vector<double>(count));
    for (std::size_t r = 0; r < all.size(); ++r) std::memcpy(all[r].data(), slots.data() + count * r, count * sizeof(double));
    return all;
  };
  if (options.transport == "mpi") {
#if SOAHEAP_HAS_MPI
    soaheap::distributed::MpiSession mpi(argc, argv);
    soaheap::distributed::MpiTransportOptions transport_options;
    transport_options.timeout_seconds = options.timeout_seconds;
    soaheap::distributed::MpiTransport transport(mpi, backend, transport_options);
    try {
      return gather(transport, body(transport, transport.rank() == 0 ? &line : nullptr));
    } catch (const std::exception& failure) {
      // The other ranks' next collective call fails naming this rank, instead of waiting.
      transport.report_failure(failure.what());
      throw;
    }
#else
    (void)argc;
    (void)argv;
    throw soaheap::invalid_argument(
        "soaheap: --transport mpi: this build has no MPI transport (configure with MPI: docs/distributed.md)");
#endif
  }
  if (options.transport == "nccl") {
#if SOAHEAP_HAS_NCCL
    if (backend != soaheap::Backend::cuda)
      throw soaheap::invalid_argument("soaheap: --transport nccl needs --backend cuda (--transport mpi runs the host backend)");
    soaheap::distributed::MpiSession mpi(argc, argv);
    soaheap::distributed::NcclTransport transport(mpi);
    return gather(transport, body(transport, transport.rank() == 0 ? &line : nullptr));
#else
    (void)argc;
    (void)argv;
    throw soaheap::invalid_argument(
        "soaheap: --transport nccl: this build has no NCCL transport (configure with NCCL and MPI: docs/distributed.md)");
#endif
  }
  soaheap::distributed::LocalGroup group(options.ranks, backend);
  std::vector<std::vector<double>> all(static_cast<std::size_t>(options.ranks));
  group.run([&](soaheap::distributed::Transport& transport) {
    all[static_cast<std::size_t>(transport.rank())] = body(transport, transport.rank() == 0 ? &line : nullptr);
  });
  line["ranks"] = options.ranks;
  return all;
}

/// @brief For each name, the list of that figure over the ranks; figure k of each rank is names[k].
inline void add_rank_lists(Result& line, const std::vector<std::string>& names, const std::vector<std::vector<double>>& figures) {
  for (std::size_t k = 0; k < names.size(); ++k) {
    std::vector<double> column;
    for (const std::vector<double>& rank : figures) column.push_back(rank.at(k));
    line[names[k]] = column;
  }
}

/// @brief The largest value of figure @p k over the ranks (e.g. the run's time: its slowest rank).
inline double max_over_ranks(const std::vector<std::vector<double>>& figures, std::size_t k) {
  double result = 0;
  for (const std::vector<double>& rank : figures) result = rank.at(k) > result ? rank.at(k) : result;
  return result;
}

}  // namespace soaheap_app
