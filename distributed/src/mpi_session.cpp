// MpiSession (mpi_session.hpp).
#include <soaheap/core/errors.hpp>
#include <soaheap/distributed/mpi_session.hpp>

#include "mpi_check.hpp"

#include <mpi.h>

#include <string>

namespace soaheap::distributed {
namespace {

using detail::check_mpi;

}  // namespace

MpiSession::MpiSession(int& argc, char**& argv) {
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  if (!initialized) {
    check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
    finalize_ = true;
  }
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  MPI_Comm host;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host), "MPI_Comm_split_type");
  check_mpi(MPI_Comm_rank(host, &local_rank_), "MPI_Comm_rank (host)");
  check_mpi(MPI_Comm_size(host, &local_size_), "MPI_Comm_size (host)");
  MPI_Comm_free(&host);
}

MpiSession::~MpiSession() {
  if (finalize_) MPI_Finalize();
}

}  // namespace soaheap::distributed
