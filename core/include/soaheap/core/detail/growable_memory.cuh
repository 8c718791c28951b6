#pragma once
/// @file growable_memory.cuh
/// @brief One of a heap's buffers (block data, block headers, bitmaps): either one fixed allocation
///        (a heap with max_bytes == bytes, and every managed heap) or a ReservedRange whose prefix is
///        mapped on demand, so that growing never moves what is already there.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/detail/reserved_range.cuh>
#include <soaheap/core/memory.cuh>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace soaheap::detail {

class GrowableMemory {
 public:
  GrowableMemory() = default;
  /// A fixed buffer of @p bytes (no driver virtual-memory calls).
  static GrowableMemory fixed(Backend backend, std::uint64_t bytes, bool managed) {
    GrowableMemory memory;
    memory.backend_ = backend;
    memory.fixed_ = Memory(backend, bytes, managed);
    memory.committed_ = bytes;
    return memory;
  }
  /// Addresses for @p reserve_bytes, mapped in chunks of about @p chunk_bytes, up to
  /// @p piece_chunks of them as one allocation; nothing mapped yet.
  static GrowableMemory reserved(Backend backend, std::uint64_t reserve_bytes, std::uint64_t chunk_bytes,
                                 std::uint64_t piece_chunks) {
    GrowableMemory memory;
    memory.backend_ = backend;
    memory.range_ = ReservedRange(backend, reserve_bytes, chunk_bytes, piece_chunks);
    memory.growable_ = true;
    return memory;
  }

  bool growable() const { return growable_; }
  void* get() const { return growable_ ? range_.base() : fixed_.get(); }
  template <class T>
  T* as() const {
    return static_cast<T*>(get());
  }
  /// Bytes from the start that are mapped (all of a fixed buffer).
  std::uint64_t committed_bytes() const { return committed_; }
  /// Bytes of memory the buffer holds now: whole chunks, or the fixed allocation.
  std::uint64_t resident_bytes() const { return growable_ ? range_.committed_bytes() : fixed_.bytes(); }
  std::uint64_t reserved_bytes() const { return growable_ ? range_.reserved_bytes() : fixed_.bytes(); }
  std::uint64_t chunk_bytes() const { return growable_ ? range_.chunk_bytes() : fixed_.bytes(); }

  /// Maps memory for [0, @p bytes) (contents undefined). Returns false, mapping nothing more, when
  /// the system or GPU has no memory for it or @p bytes passes the reservation.
  bool ensure(std::uint64_t bytes) {
    if (bytes <= committed_) return true;
    if (!ensure_range(committed_, bytes, false)) return false;
    const std::uint64_t chunk = range_.chunk_bytes();
    committed_ = (bytes + chunk - 1) / chunk * chunk;
    return true;
  }
  /// Maps memory for [@p begin, @p end); chunks mapped by this call are zeroed when @p zero (a
  /// memset: between kernels only). False, mapping nothing, when there is no memory for it.
  bool ensure_range(std::uint64_t begin, std::uint64_t end, bool zero) {
    if (!growable_) return end <= fixed_.bytes();
    if (end <= begin) return true;
    const std::uint64_t chunk = range_.chunk_bytes();
    const std::uint64_t first = begin / chunk;
    const std::uint64_t last = (end + chunk - 1) / chunk;  // exclusive
    if (last > range_.chunk_count()) return false;
    std::vector<std::uint64_t> fresh;
    for (std::uint64_t c = first; c < last; ++c)
      if (!range_.is_committed(c)) fresh.push_back(c);
    if (!range_.commit_range(first, last)) return false;
    // Host pages start zeroed (also after a release); GPU memory from cuMemCreate does not.
    if (zero && backend_ == Backend::cuda)
      for (const std::uint64_t c : fresh) fill_byte(c * chunk, chunk, 0);
    return true;
  }
  /// Where release_above(@p bytes) would start giving memory back: @p bytes rounded up to a whole
  /// chunk, and past a piece that holds memory on both sides of it (pieces go back whole).
  std::uint64_t release_boundary(std::uint64_t bytes) const {
    if (!growable_) return committed_;
    const std::uint64_t chunk = range_.chunk_bytes();
    std::uint64_t keep = (bytes + chunk - 1) / chunk;
    while (keep < range_.chunk_count() && range_.is_committed(keep) && range_.piece_start(keep) < keep) ++keep;
    return keep * chunk;
  }
  /// Gives back the memory at or above release_boundary(@p bytes); returns the bytes still mapped
  /// from the start.
  std::uint64_t release_above(std::uint64_t bytes) {
    if (!growable_) return committed_;
    const std::uint64_t chunk = range_.chunk_bytes();
    const std::uint64_t keep = release_boundary(bytes) / chunk;
    for (std::uint64_t c = keep; c < range_.chunk_count(); ++c) range_.release(c);
    if (committed_ > keep * chunk) committed_ = keep * chunk;
    return committed_;
  }

  /// Gives back the pieces that lie wholly inside [@p begin, @p end) (a piece reaching outside
  /// stays whole); their chunks read as zeroes when a later ensure_range(..., true) maps them again.
  void release_range(std::uint64_t begin, std::uint64_t end) {
    if (!growable_ || end <= begin) return;
    const std::uint64_t chunk = range_.chunk_bytes();
    const std::uint64_t first = (begin + chunk - 1) / chunk;
    const std::uint64_t last = std::min(end / chunk, range_.chunk_count());  // exclusive
    for (std::uint64_t c = first; c < last;) {
      const std::uint64_t piece_end = range_.piece_end(c);
      if (range_.is_committed(c) && range_.piece_start(c) >= first && piece_end <= last) range_.release(c);
      c = piece_end;
    }
  }

  void copy_to_host(void* destination, std::uint64_t offset, std::uint64_t count) const {
    if (count == 0) return;
    if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemcpy(destination, static_cast<const char*>(get()) + offset, count, cudaMemcpyDeviceToHost));
#endif
    } else {
      std::memcpy(destination, static_cast<const char*>(get()) + offset, count);
    }
  }
  /// Sets [offset, offset + count) to @p value bytes (between kernels: a memset on the default stream).
  void fill_byte(std::uint64_t offset, std::uint64_t count, int value) {
    if (count == 0) return;
    if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemset(static_cast<char*>(get()) + offset, value, count));
#endif
    } else {
      std::memset(static_cast<char*>(get()) + offset, value, count);
    }
  }
  void copy_from_host(std::uint64_t offset, const void* source, std::uint64_t count) {
    if (count == 0) return;
    if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
      SOAHEAP_CUDA_CHECK(cudaMemcpy(static_cast<char*>(get()) + offset, source, count, cudaMemcpyHostToDevice));
#endif
    } else {
      std::memcpy(static_cast<char*>(get()) + offset, source, count);
    }
  }

 private:
  Backend backend_ = Backend::host;
  Memory fixed_;
  ReservedRange range_;
  bool growable_ = false;
  std::uint64_t committed_ = 0;
};

}  // namespace soaheap::detail
