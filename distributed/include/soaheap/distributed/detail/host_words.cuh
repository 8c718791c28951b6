#pragma once
/// @file detail/host_words.cuh
/// @brief HostWords: a few 64-bit words of host memory that kernels read and write directly
///        (pinned and mapped on cuda, plain host memory on the host backend). Migration publishes
///        its counts into them from a kernel and reads them after its one wait, so no copy from the
///        device is needed, and hands the host's offsets to kernels through them without a copy
///        that would block the host.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/memory.cuh>

#include <cstddef>
#include <cstdint>
#include <utility>

namespace soaheap::distributed::detail {

class HostWords {
 public:
  HostWords() = default;
  HostWords(Backend backend, std::size_t words) : words_(words) {
    if (words == 0) return;
    if (backend == Backend::host) {
      plain_ = soaheap::detail::Memory(Backend::host, words * sizeof(std::uint64_t));
      host_ = device_ = plain_.as<std::uint64_t>();
      return;
    }
#if SOAHEAP_HAS_CUDA
    void* host = nullptr;
    SOAHEAP_CUDA_CHECK(cudaHostAlloc(&host, words * sizeof(std::uint64_t), cudaHostAllocMapped));
    void* device = nullptr;
    const cudaError_t status = cudaHostGetDevicePointer(&device, host, 0);
    if (status != cudaSuccess) {
      cudaFreeHost(host);
      SOAHEAP_CUDA_CHECK(status);
    }
    host_ = static_cast<std::uint64_t*>(host);
    device_ = static_cast<std::uint64_t*>(device);
    pinned_ = true;
#else
    throw usage_error("the cuda backend is not compiled into this translation unit (compile it with nvcc)");
#endif
  }
  HostWords(const HostWords&) = delete;
  HostWords& operator=(const HostWords&) = delete;
  HostWords(HostWords&& other) noexcept { swap(other); }
  HostWords& operator=(HostWords&& other) noexcept {
    HostWords(std::move(other)).swap(*this);
    return *this;
  }
  ~HostWords() {
#if SOAHEAP_HAS_CUDA
    if (pinned_ && host_ != nullptr) cudaFreeHost(host_);
#endif
  }

  /// The words for host code; read them only after waiting for the kernels that write them.
  std::uint64_t* host() const { return host_; }
  /// The same words for kernels.
  std::uint64_t* device() const { return device_; }
  std::size_t size() const { return words_; }

 private:
  void swap(HostWords& other) noexcept {
    std::swap(plain_, other.plain_);
    std::swap(host_, other.host_);
    std::swap(device_, other.device_);
    std::swap(words_, other.words_);
    std::swap(pinned_, other.pinned_);
  }
  soaheap::detail::Memory plain_;
  std::uint64_t* host_ = nullptr;
  std::uint64_t* device_ = nullptr;
  std::size_t words_ = 0;
  bool pinned_ = false;
};

}  // namespace soaheap::distributed::detail
