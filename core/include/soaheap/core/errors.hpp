#pragma once
/// @file errors.hpp
/// @brief The typed exceptions soaheap throws, and the one macro through which CUDA calls are checked.

#include <stdexcept>
#include <string>

namespace soaheap {

/// @brief Base of every soaheap exception.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief A host API call received a bad value (the message names it).
class invalid_argument : public error {
 public:
  using error::error;
};

/// @brief The heap ran out of blocks while a kernel allocated (reported at the next host call).
class out_of_memory : public error {
 public:
  using error::error;
};

/// @brief A destroy() of something that is not a live object of this heap, or an operation misused at runtime.
class usage_error : public error {
 public:
  using error::error;
};

/// @brief `heap.validate()` found a broken invariant (the message names block, class and invariant).
class invariant_violation : public error {
 public:
  using error::error;
};

/// @brief A CUDA runtime call failed (the message names the call, file and line).
class cuda_error : public error {
 public:
  using error::error;
};

namespace detail {
[[noreturn]] inline void throw_cuda_error(const char* call, const char* message, const char* file, int line) {
  throw cuda_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + message);
}
}  // namespace detail

}  // namespace soaheap

#if defined(__CUDACC__)
/// Throws soaheap::cuda_error naming the failing call, file and line.
#define SOAHEAP_CUDA_CHECK(call)                                                                   \
  do {                                                                                             \
    const cudaError_t soaheap_status_ = (call);                                                    \
    if (soaheap_status_ != cudaSuccess)                                                            \
      ::soaheap::detail::throw_cuda_error(#call, cudaGetErrorString(soaheap_status_), __FILE__, __LINE__); \
  } while (0)
#endif
