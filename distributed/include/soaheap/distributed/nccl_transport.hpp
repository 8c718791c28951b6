#pragma once
/// @file nccl_transport.hpp
/// @brief The Transport programs run on several GPUs: one process per GPU, started by MPI
///        (`mpirun -np 2 ./program`), data moved by NCCL. MPI gives rank and size and broadcasts
///        rank 0's NCCL unique id; each process takes the GPU `local rank % visible GPUs` of its
///        host, so nothing names ranks, hosts or devices. Compiled into soaheap_distributed_nccl
///        when CMake finds NCCL and MPI (SOAHEAP_DISTRIBUTED=AUTO); SOAHEAP_HAS_NCCL says so.
///        Plain C++: nccl.h and mpi.h stay inside distributed/src. For several processes per GPU,
///        or none, MpiTransport (mpi_transport.hpp) is the choice.

#include <soaheap/distributed/mpi_session.hpp>
#include <soaheap/distributed/transport.hpp>

#include <memory>
#include <string>

namespace soaheap::distributed {

/// @brief A NCCL communicator over all processes of the MPI session, on a stream of its own.
/// Creating it selects this process's GPU (cudaSetDevice): create it before the heap.
class NcclTransport final : public Transport {
 public:
  /// @throw error when there is no GPU, or NCCL or MPI fail (the message names the call)
  explicit NcclTransport(const MpiSession& mpi);
  ~NcclTransport() override;
  NcclTransport(const NcclTransport&) = delete;
  NcclTransport& operator=(const NcclTransport&) = delete;

  int rank() const override;
  int size() const override;
  std::string name() const override { return "nccl"; }
  /// The CUDA device this rank uses.
  int device() const;

  void exchange_counts(const std::uint64_t* send, std::uint64_t* received) override;
  /// One all-gather for all @p width numbers per pair of ranks.
  void exchange_count_rows(const std::uint64_t* send, std::uint64_t* received, int width) override;
  void exchange(const std::vector<Message>& sends, const std::vector<Message>& receives) override;
  void all_reduce_sum(std::uint64_t* values, int count) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace soaheap::distributed
