#pragma once
/// @file mpi_session.hpp
/// @brief MpiSession: MPI for as long as it lives (MPI_Init unless already initialized, MPI_Finalize),
///        with this process's rank among all processes and among those of its host. Both transports
///        of several processes start from it (MpiTransport, NcclTransport). Compiled into
///        soaheap_distributed_mpi when CMake finds MPI; SOAHEAP_HAS_MPI says so. Plain C++: mpi.h
///        stays inside distributed/src.

namespace soaheap::distributed {

/// @brief MPI for as long as it lives: MPI_Init (unless already initialized) and MPI_Finalize.
class MpiSession {
 public:
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// This process's rank among the processes of its host, and their number.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  bool finalize_ = false;
};

}  // namespace soaheap::distributed
