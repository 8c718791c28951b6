#pragma once
/// @file cli.cuh
/// @brief The command line of an application or baseline (examples/harness/harness.hpp), with the
///        default backend this build and machine can run.

#include "examples/harness/harness.hpp"

#include <soaheap/core/backend.cuh>

#include <string>

namespace soaheap_app {

/// @brief The common options with @p defaults; the default backend is cuda when this build can
///        run it on a present GPU.
inline Cli application_cli(const std::string& description, AppDefaults defaults) {
  return Cli(description, defaults, soaheap::cuda_available());
}

}  // namespace soaheap_app
