#pragma once
/// @file memory.cuh
/// @brief An owning buffer in host or device memory, with the few copies the heap needs.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace soaheap::detail {

class Memory {
 public:
  /// Alignment of every buffer: block data segments must start on 128-byte boundaries.
  static constexpr std::size_t kAlignment = 256;

  Memory() = default;
  /// @param managed on cuda: CUDA managed (unified) memory, which host code may read and write
  ///        between kernels, instead of device memory; ignored on the host backend
  Memory(Backend backend, std::size_t bytes, bool managed = false) : backend_(backend), bytes_(bytes) {
    if (bytes == 0) return;
    if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      const cudaError_t status = managed ? cudaMallocManaged(&pointer_, bytes, cudaMemAttachGlobal) : cudaMalloc(&pointer_, bytes);
      if (status != cudaSuccess) {
        (void)cudaGetLastError();
        throw out_of_memory(std::string("soaheap: ") + (managed ? "cudaMallocManaged" : "cudaMalloc") + " of " +
                            std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(status));
      }
#else
      (void)managed;
      throw usage_error("the cuda backend is not compiled into this translation unit (compile it with nvcc)");
#endif
    } else {
      const std::size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
      pointer_ = std::aligned_alloc(kAlignment, rounded);
      if (pointer_ == nullptr)
        throw out_of_memory("soaheap: host allocation of " + std::to_string(bytes) + " bytes failed");
    }
  }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  Memory(Memory&& other) noexcept { swap(other); }
  Memory& operator=(Memory&& other) noexcept {
    Memory(std::move(other)).swap(*this);
    return *this;
  }
  ~Memory() { release(); }

  void* get() const { return pointer_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(pointer_);
  }
  std::size_t bytes() const { return bytes_; }

  void fill_zero() { fill_byte(0); }
  void fill_byte(int value) {
    if (bytes_ == 0) return;
    if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemset(pointer_, value, bytes_));
#endif
    } else {
      std::memset(pointer_, value, bytes_);
    }
  }
  void copy_to_host(void* destination, std::size_t offset, std::size_t count) const {
    if (count == 0) return;
    if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemcpy(destination, static_cast<const char*>(pointer_) + offset, count,
                                    cudaMemcpyDeviceToHost));
#endif
    } else {
      std::memcpy(destination, static_cast<const char*>(pointer_) + offset, count);
    }
  }
  void copy_from_host(std::size_t offset, const void* source, std::size_t count) {
    if (count == 0) return;
    if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemcpy(static_cast<char*>(pointer_) + offset, source, count, cudaMemcpyHostToDevice));
#endif
    } else {
      std::memcpy(static_cast<char*>(pointer_) + offset, source, count);
    }
  }

 private:
  void swap(Memory& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(pointer_, other.pointer_);
    std::swap(bytes_, other.bytes_);
  }
  void release() noexcept {
    if (pointer_ == nullptr) return;
    if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      cudaFree(pointer_);  // waits for the device; a heap's growth during a kernel needs no stream work
#endif
    } else {
      std::free(pointer_);
    }
    pointer_ = nullptr;
  }

  Backend backend_ = Backend::host;
  void* pointer_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Words of pinned host memory (one unless @p count says more) that kernels read and write through
/// their mapped device address (cuda only; empty elsewhere): once the host has waited for the
/// kernels it reads what they wrote, with no copy.
class MappedWord {
 public:
  MappedWord() = default;
  MappedWord(Backend backend, std::uint64_t initial, int count = 1) {
    if (backend != Backend::cuda) return;
#if SOAHEAP_HAS_CUDA
    void* host = nullptr;
    SOAHEAP_CUDA_CHECK(cudaHostAlloc(&host, sizeof(std::uint64_t) * static_cast<std::size_t>(count), cudaHostAllocMapped));
    host_ = static_cast<std::uint64_t*>(host);
    for (int i = 0; i < count; ++i) host_[i] = initial;
    void* device = nullptr;
    const cudaError_t status = cudaHostGetDevicePointer(&device, host, 0);
    if (status != cudaSuccess) {
      cudaFreeHost(host);
      host_ = nullptr;
      SOAHEAP_CUDA_CHECK(status);
    }
    device_ = static_cast<std::uint64_t*>(device);
#else
    (void)initial;
    (void)count;
#endif
  }
  MappedWord(const MappedWord&) = delete;
  MappedWord& operator=(const MappedWord&) = delete;
  MappedWord(MappedWord&& other) noexcept
      : host_(std::exchange(other.host_, nullptr)), device_(std::exchange(other.device_, nullptr)) {}
  MappedWord& operator=(MappedWord&& other) noexcept {
    std::swap(host_, other.host_);
    std::swap(device_, other.device_);
    return *this;
  }
  ~MappedWord() {
#if SOAHEAP_HAS_CUDA
    if (host_ != nullptr) {
      cudaDeviceSynchronize();  // cudaFreeHost waits for the device as well
      cudaFreeHost(host_);
    }
#endif
  }
  /// The word for host code (nullptr when empty).
  std::uint64_t* host() const { return host_; }
  /// The same word for kernels (nullptr when empty).
  std::uint64_t* device() const { return device_; }

 private:
  std::uint64_t* host_ = nullptr;
  std::uint64_t* device_ = nullptr;
};

/// The mapped word of a LaunchHint (empty elsewhere than on cuda). Starts at LaunchHint::kUnknown.
class LaunchHintWord {
 public:
  LaunchHintWord() = default;
  explicit LaunchHintWord(Backend backend) : word_(backend, LaunchHint::kUnknown) {}
  LaunchHint hint() const { return LaunchHint{word_.host(), word_.device()}; }

 private:
  MappedWord word_;
};

}  // namespace soaheap::detail
