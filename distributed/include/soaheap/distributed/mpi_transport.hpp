#pragma once
/// @file mpi_transport.hpp
/// @brief MpiTransport: the Transport of several processes that need no GPU of their own. Every
///        exchange is one round of nonblocking MPI point-to-point messages. On the host backend the
///        messages are plain host memory; on the cuda backend they are passed to MPI as device
///        pointers when the MPI library reports CUDA support at run time, and staged through pinned
///        host buffers otherwise. Any number of processes may share a GPU (`local rank % visible
///        GPUs`), and processes of the host backend need none. Compiled into soaheap_distributed_mpi
///        when CMake finds MPI (SOAHEAP_HAS_MPI=1); plain C++: mpi.h stays in distributed/src.
///
/// Failures do not leave ranks waiting: every wait polls (MPI_Test / MPI_Improbe) against a
/// deadline, and also for a failure notice from any rank. A rank whose work throws sends such a
/// notice, by report_failure() or by destroying its transport while the exception unwinds; every
/// other rank's next (or current) collective call then throws rank_failed naming it. Calls that
/// disagree across ranks (an exchange_counts against an all_reduce_sum, different widths) are
/// refused with a message saying what each rank called.

#include <soaheap/core/backend.cuh>
#include <soaheap/distributed/mpi_session.hpp>
#include <soaheap/distributed/transport.hpp>

#include <memory>
#include <string>

namespace soaheap::distributed {

/// @brief How the cuda backend's messages reach MPI.
enum class MpiDeviceData {
  automatic,  ///< device pointers when MPIX_Query_cuda_support() says yes at run time, else staged
  staged,     ///< always through pinned host buffers
  device,     ///< always device pointers (the MPI library must be CUDA-aware)
};

struct MpiTransportOptions {
  /// @brief Longest wait of any call, in seconds. 0: the environment variable SOAHEAP_MPI_TIMEOUT,
  /// or kDefaultTimeoutSeconds without it.
  double timeout_seconds = 0;
  MpiDeviceData device_data = MpiDeviceData::automatic;
  static constexpr double kDefaultTimeoutSeconds = 300;
};

/// @brief A communicator over all processes of the MPI session (a duplicate of MPI_COMM_WORLD, so
/// its messages never meet the program's own).
class MpiTransport final : public Transport {
 public:
  /// @brief Collective over all processes. On the cuda backend it selects this process's GPU
  /// (cudaSetDevice, `local rank % visible GPUs`): create it before the heap.
  /// @throw invalid_argument for a bad timeout or a cuda backend this build or machine lacks;
  ///        error when MPI fails or the processes do not all construct one within the timeout
  MpiTransport(const MpiSession& mpi, Backend backend, MpiTransportOptions options = MpiTransportOptions{});
  ~MpiTransport() override;
  MpiTransport(const MpiTransport&) = delete;
  MpiTransport& operator=(const MpiTransport&) = delete;

  int rank() const override;
  int size() const override;
  std::string name() const override { return "mpi"; }
  /// The CUDA device this rank uses, -1 on the host backend.
  int device() const;
  /// True when cuda-backend messages go to MPI as device pointers (no staging).
  bool device_pointers() const;
  /// The bound of every wait, in seconds.
  double timeout_seconds() const;

  void exchange_counts(const std::uint64_t* send, std::uint64_t* received) override;
  void exchange_count_rows(const std::uint64_t* send, std::uint64_t* received, int width) override;
  void exchange(const std::vector<Message>& sends, const std::vector<Message>& receives) override;
  void all_reduce_sum(std::uint64_t* values, int count) override;

  /// @brief Tells every other rank that this one failed with @p what (their next collective call
  /// throws rank_failed naming this rank); this transport refuses further calls. Waits at most the
  /// timeout for the notices to leave. Called by the destructor when an exception unwinds past it.
  void report_failure(const std::string& what) noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace soaheap::distributed
