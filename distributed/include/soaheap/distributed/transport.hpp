#pragma once
/// @file transport.hpp
/// @brief The small interface migration talks through: one rank per heap (one process per GPU with
///        NCCL, or threads of one process with LocalGroup), counts exchanged all-to-all, then the
///        packed objects sent and received in one group. Plain C++: the NCCL implementation lives in
///        a host-compiled library, so no translation unit that includes this needs nccl.h or mpi.h.

#include <cstdint>
#include <string>
#include <vector>

namespace soaheap::distributed {

/// @brief One point-to-point transfer of a group: @p bytes at @p data (memory of the transport's
///        kind: device memory for NCCL, host or device memory for LocalGroup) to or from rank @p peer.
struct Message {
  int peer = 0;
  void* data = nullptr;
  std::uint64_t bytes = 0;
};

/// @brief A communicator of `size()` ranks. Every call is collective: all ranks make the same calls
///        in the same order (each with its own arguments), as with MPI and NCCL.
class Transport {
 public:
  virtual ~Transport() = default;

  /// This rank, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// What the transport is, for result lines and errors ("nccl", "local").
  virtual std::string name() const = 0;

  /// @brief All-to-all of one number per pair of ranks: @p send[p] goes to rank p, @p received[p]
  /// arrives from rank p (host arrays of size() entries; the entry for this rank is copied).
  virtual void exchange_counts(const std::uint64_t* send, std::uint64_t* received) = 0;

  /// @brief Runs @p sends and @p receives as one group and returns when all are complete. Each
  /// receive must match the size of the send its peer posts to this rank (the counts were exchanged
  /// first). At most one send and one receive per peer; none with this rank itself.
  virtual void exchange(const std::vector<Message>& sends, const std::vector<Message>& receives) = 0;

  /// @brief Sums @p values (host, @p count entries) over all ranks, in place, on every rank.
  virtual void all_reduce_sum(std::uint64_t* values, int count) = 0;
};

}  // namespace soaheap::distributed
