#pragma once
/// @file transport.hpp
/// @brief The small interface migration talks through: one rank per heap (one process per GPU with
///        NCCL, processes sharing GPUs or using none with MPI, threads of one process with
///        LocalGroup), counts exchanged all-to-all, then the packed objects sent and received in one
///        group. Plain C++: the NCCL and MPI implementations live in host-compiled libraries, so no
///        translation unit that includes this needs nccl.h or mpi.h.

#include <soaheap/core/errors.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace soaheap::distributed {

/// @brief A collective call failed because another rank failed (its message says what that rank
/// reported); failed_rank() names it.
class rank_failed : public error {
 public:
  rank_failed(int failed, const std::string& message) : error(message), failed_(failed) {}
  int failed_rank() const { return failed_; }

 private:
  int failed_;
};

/// @brief A collective call waited longer than its transport's timeout (the message says for what).
class transport_timeout : public error {
 public:
  using error::error;
};

/// @brief One point-to-point transfer of a group: @p bytes at @p data (memory of the transport's
///        kind: device memory for NCCL, host or device memory for LocalGroup) to or from rank @p peer.
struct Message {
  int peer = 0;
  void* data = nullptr;
  std::uint64_t bytes = 0;
};

/// @brief A communicator of `size()` ranks. Every call is collective: all ranks make the same calls
///        in the same order (each with its own arguments), as with MPI and NCCL. When one rank fails,
///        the others' collective calls throw (rank_failed, or transport_timeout where a transport
///        cannot know) instead of waiting forever.
class Transport {
 public:
  virtual ~Transport() = default;

  /// This rank, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// What the transport is, for result lines and errors ("nccl", "mpi", "local").
  virtual std::string name() const = 0;

  /// @brief All-to-all of one number per pair of ranks: @p send[p] goes to rank p, @p received[p]
  /// arrives from rank p (host arrays of size() entries; the entry for this rank is copied).
  virtual void exchange_counts(const std::uint64_t* send, std::uint64_t* received) = 0;

  /// @brief All-to-all of @p width numbers per pair of ranks in one exchange: @p send[p * width + k]
  /// goes to rank p, @p received[p * width + k] arrives from rank p (host arrays of size() * width
  /// entries). Migration sends all its classes' counts with one call. The default makes width
  /// exchange_counts calls; transports override it with one round.
  virtual void exchange_count_rows(const std::uint64_t* send, std::uint64_t* received, int width) {
    const auto n = static_cast<std::size_t>(size());
    std::vector<std::uint64_t> column_send(n), column_received(n);
    for (int k = 0; k < width; ++k) {
      for (std::size_t p = 0; p < n; ++p) column_send[p] = send[p * width + k];
      exchange_counts(column_send.data(), column_received.data());
      for (std::size_t p = 0; p < n; ++p) received[p * width + k] = column_received[p];
    }
  }

  /// @brief Runs @p sends and @p receives as one group and returns when all are complete. Each
  /// receive must match the size of the send its peer posts to this rank (the counts were exchanged
  /// first). At most one send and one receive per peer; none with this rank itself.
  virtual void exchange(const std::vector<Message>& sends, const std::vector<Message>& receives) = 0;

  /// @brief Sums @p values (host, @p count entries) over all ranks, in place, on every rank.
  virtual void all_reduce_sum(std::uint64_t* values, int count) = 0;
};

}  // namespace soaheap::distributed
