// check_mpi: the one MPI error check of the compiled distributed sources (private to distributed/src).
#pragma once

#include <soaheap/core/errors.hpp>

#include <mpi.h>

#include <string>

namespace soaheap::distributed::detail {

/// MPI's text for error code @p result.
inline std::string mpi_message(int result) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(result, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

/// Throws soaheap::error naming @p who and the failed @p call unless @p result is MPI_SUCCESS.
inline void check_mpi(int result, const char* call, const char* who = "soaheap") {
  if (result == MPI_SUCCESS) return;
  throw error(std::string(who) + ": " + call + " failed: " + mpi_message(result));
}

}  // namespace soaheap::distributed::detail
