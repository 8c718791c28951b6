#pragma once
/// @file reserved_range.cuh
/// @brief A range of addresses reserved once and backed by memory chunk by chunk: committing
///        chunks maps memory under their addresses, releasing gives the memory back to the system,
///        and nothing in the range ever moves: what a heap whose resident memory follows its live
///        set is built on.
///
/// Chunks are the unit of bookkeeping; a commit maps the chunks it backs in *pieces* of up to
/// `piece_chunks` consecutive chunks, one allocation each, and a piece is given back whole. On an
/// H200 mapping 1 GiB costs 24 ms in 2 MiB allocations and 1.8 ms in 32 MiB ones
/// (`tools/gpu/vmm-probe.cu`): a heap maps its growth in pieces and trims in pieces.
///
/// On the host backend the range is an anonymous `mmap` without access (no memory, no swap
/// reserved); a commit makes chunks readable and writable (`mprotect`), a release drops their pages
/// (`madvise(MADV_DONTNEED)`) and takes the access away again. On cuda it is CUDA's virtual memory
/// management: `cuMemAddressReserve` once, then per piece `cuMemCreate` + `cuMemMap`, one
/// `cuMemSetAccess` per run of pieces, and `cuMemUnmap` + `cuMemRelease` to give a piece back.
/// The driver functions are looked up at run time (`cudaGetDriverEntryPointByVersion`), so nothing
/// links libcuda and a program built with the cuda backend still starts on a machine without a
/// driver.
///
/// Not thread-safe: one owner commits and releases (the heap, under its own lock).

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#if SOAHEAP_HAS_CUDA
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

namespace soaheap::detail {

class ReservedRange {
 public:
  ReservedRange() = default;
  /// Reserves addresses for @p bytes (rounded up to whole chunks) in chunks of @p chunk_bytes
  /// (rounded up to the backend's granularity: the page size on the host, the device's
  /// recommended allocation granularity on cuda), mapped in pieces of up to @p piece_chunks chunks.
  /// Throws usage_error when the device has no virtual memory management, out_of_memory when the
  /// addresses cannot be reserved.
  ReservedRange(Backend backend, std::uint64_t bytes, std::uint64_t chunk_bytes, std::uint64_t piece_chunks = 1);
  ReservedRange(const ReservedRange&) = delete;
  ReservedRange& operator=(const ReservedRange&) = delete;
  ReservedRange(ReservedRange&& other) noexcept { swap(other); }
  ReservedRange& operator=(ReservedRange&& other) noexcept {
    ReservedRange(std::move(other)).swap(*this);
    return *this;
  }
  ~ReservedRange() { reset(); }

  void* base() const { return base_; }
  std::uint64_t chunk_bytes() const { return chunk_bytes_; }
  std::uint64_t chunk_count() const { return static_cast<std::uint64_t>(chunks_.size()); }
  std::uint64_t reserved_bytes() const { return chunk_bytes_ * chunk_count(); }
  std::uint64_t committed_bytes() const { return committed_ * chunk_bytes_; }
  bool is_committed(std::uint64_t chunk) const { return chunks_.at(chunk).committed; }
  /// The first chunk of the piece that backs committed chunk @p chunk (itself when uncommitted).
  std::uint64_t piece_start(std::uint64_t chunk) const {
    const Chunk& entry = chunks_.at(chunk);
    return entry.committed ? entry.piece_first : chunk;
  }
  /// One past the last chunk of the piece that backs committed chunk @p chunk (chunk + 1 when uncommitted).
  std::uint64_t piece_end(std::uint64_t chunk) const {
    const Chunk& entry = chunks_.at(chunk);
    return entry.committed ? entry.piece_first + chunks_[entry.piece_first].piece_chunks : chunk + 1;
  }

  /// Backs chunk @p chunk with memory (its contents are undefined until written). Returns false,
  /// changing nothing, when the system (host) or the GPU (cuda) has no memory left for it.
  bool commit(std::uint64_t chunk) { return commit_range(chunk, chunk + 1); }
  /// Backs every chunk of [@p first, @p last) that has no memory yet, in pieces; all or, returning
  /// false, none.
  bool commit_range(std::uint64_t first, std::uint64_t last);
  /// Gives back the memory of the piece that holds chunk @p chunk (every chunk of it); the
  /// addresses stay reserved (touching them faults).
  void release(std::uint64_t chunk);

  /// The backend's commit unit: the host's page size, or the device's recommended VMM granularity.
  static std::uint64_t granularity(Backend backend);

 private:
  struct Chunk {
    bool committed = false;
    std::uint64_t piece_first = 0;   ///< the first chunk of the piece backing this one
    std::uint64_t piece_chunks = 0;  ///< on a piece's first chunk: the chunks of the piece
    std::uint64_t handle = 0;        ///< on a piece's first chunk (cuda): its CUmemGenericAllocationHandle
  };
  void check_chunk(std::uint64_t chunk, const char* what) const;
  void reset() noexcept;
  void swap(ReservedRange& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(base_, other.base_);
    std::swap(chunk_bytes_, other.chunk_bytes_);
    std::swap(piece_chunks_, other.piece_chunks_);
    std::swap(chunks_, other.chunks_);
    std::swap(committed_, other.committed_);
    std::swap(device_, other.device_);
  }

  Backend backend_ = Backend::host;
  void* base_ = nullptr;
  std::uint64_t chunk_bytes_ = 0;
  std::uint64_t piece_chunks_ = 1;
  std::vector<Chunk> chunks_;
  std::uint64_t committed_ = 0;
  int device_ = 0;
};

// ---- the driver's virtual memory management, looked up at run time ------------------------------
#if SOAHEAP_HAS_CUDA
struct VirtualMemoryDriver {
  PFN_cuMemAddressReserve_v10020 address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_attribute = nullptr;

  /// The functions of the installed driver (looked up once per process).
  static const VirtualMemoryDriver& get() {
    static const VirtualMemoryDriver driver = load();
    return driver;
  }
  static void check(CUresult status, const char* what) {
    if (status == CUDA_SUCCESS) return;
    throw cuda_error(std::string("soaheap: ") + what + " failed with CUresult " + std::to_string(static_cast<int>(status)));
  }
  static CUmemAllocationProp properties(int device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    return prop;
  }

 private:
  template <class Function>
  static void find(const char* name, Function& function) {
    void* address = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    // 12000: the versions of these entry points that every CUDA 12 and 13 driver has.
    const cudaError_t status = cudaGetDriverEntryPointByVersion(name, &address, 12000, cudaEnableDefault, &found);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw cuda_error(std::string("soaheap: looking up the CUDA driver's ") + name + " failed: " + cudaGetErrorString(status));
    }
    if (found != cudaDriverEntryPointSuccess || address == nullptr)
      throw usage_error(std::string("soaheap: the CUDA driver has no ") + name +
                        " (virtual memory management); a growable heap needs a driver of CUDA 12 or later");
    function = reinterpret_cast<Function>(address);
  }
  static VirtualMemoryDriver load() {
    VirtualMemoryDriver driver;
    find("cuMemAddressReserve", driver.address_reserve);
    find("cuMemAddressFree", driver.address_free);
    find("cuMemCreate", driver.create);
    find("cuMemRelease", driver.release);
    find("cuMemMap", driver.map);
    find("cuMemUnmap", driver.unmap);
    find("cuMemSetAccess", driver.set_access);
    find("cuMemGetAllocationGranularity", driver.granularity);
    find("cuDeviceGetAttribute", driver.device_attribute);
    return driver;
  }
};
#endif

// ---- definitions ----------------------------------------------------------------------------------
/// True when ranges can be reserved on @p backend: always on the host; on cuda when the driver has
/// virtual memory management and the current GPU supports it.
inline bool virtual_memory_supported(Backend backend) {
  if (backend != Backend::cuda) return true;
  try {
    (void)ReservedRange::granularity(backend);
    return true;
  } catch (const usage_error&) {
    return false;
  }
}


inline std::uint64_t ReservedRange::granularity(Backend backend) {
  if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
    const VirtualMemoryDriver& driver = VirtualMemoryDriver::get();
    int device = 0;
    SOAHEAP_CUDA_CHECK(cudaGetDevice(&device));
    int supported = 0;
    VirtualMemoryDriver::check(
        driver.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device),
        "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)");
    if (supported == 0)
      throw usage_error("soaheap: GPU " + std::to_string(device) +
                        " has no virtual memory management, which a growable heap needs; give max_bytes = 0 "
                        "for a fixed heap");
    const CUmemAllocationProp prop = VirtualMemoryDriver::properties(device);
    std::size_t bytes = 0;
    VirtualMemoryDriver::check(driver.granularity(&bytes, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                               "cuMemGetAllocationGranularity");
    return bytes;
#else
    throw usage_error("the cuda backend is not compiled into this translation unit (compile it with nvcc)");
#endif
  }
  return static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

inline ReservedRange::ReservedRange(Backend backend, std::uint64_t bytes, std::uint64_t chunk_bytes,
                                    std::uint64_t piece_chunks)
    : backend_(backend), piece_chunks_(piece_chunks) {
  if (bytes == 0 || chunk_bytes == 0 || piece_chunks == 0)
    throw invalid_argument("soaheap: a reserved range needs bytes > 0, chunk_bytes > 0 and piece_chunks > 0 (got bytes=" +
                           std::to_string(bytes) + ", chunk_bytes=" + std::to_string(chunk_bytes) +
                           ", piece_chunks=" + std::to_string(piece_chunks) + ")");
  const std::uint64_t unit = granularity(backend);
  chunk_bytes_ = (chunk_bytes + unit - 1) / unit * unit;
  const std::uint64_t chunks = (bytes + chunk_bytes_ - 1) / chunk_bytes_;
  if (chunks > (~std::uint64_t{0} >> 1) / chunk_bytes_)
    throw invalid_argument("soaheap: a reserved range of " + std::to_string(bytes) + " bytes is larger than any address space");
  const std::uint64_t total = chunks * chunk_bytes_;
  if (backend == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
    SOAHEAP_CUDA_CHECK(cudaGetDevice(&device_));
    CUdeviceptr address = 0;
    const CUresult status = VirtualMemoryDriver::get().address_reserve(&address, total, chunk_bytes_, 0, 0);
    if (status != CUDA_SUCCESS)
      throw out_of_memory("soaheap: reserving " + std::to_string(total) + " bytes of GPU addresses failed (CUresult " +
                          std::to_string(static_cast<int>(status)) + "); give a smaller max_bytes");
    base_ = reinterpret_cast<void*>(address);
#endif
  } else {
    void* address = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (address == MAP_FAILED)
      throw out_of_memory("soaheap: reserving " + std::to_string(total) +
                          " bytes of addresses failed (mmap); give a smaller max_bytes");
    base_ = address;
  }
  chunks_.resize(chunks);
}

inline void ReservedRange::check_chunk(std::uint64_t chunk, const char* what) const {
  if (chunk >= chunk_count())
    throw invalid_argument(std::string("soaheap: ") + what + " of chunk " + std::to_string(chunk) + " of a range of " +
                           std::to_string(chunk_count()) + " chunks");
}

inline bool ReservedRange::commit_range(std::uint64_t first, std::uint64_t last) {
  if (last <= first) return true;
  check_chunk(last - 1, "commit");
  struct Piece {
    std::uint64_t first, chunks, handle;
  };
  std::vector<Piece> pieces;  // what this call maps, in address order
  for (std::uint64_t chunk = first; chunk < last;) {
    if (chunks_[chunk].committed) {
      ++chunk;
      continue;
    }
    std::uint64_t end = chunk + 1;
    while (end < last && end - chunk < piece_chunks_ && !chunks_[end].committed) ++end;
    pieces.push_back({chunk, end - chunk, 0});
    chunk = end;
  }
  if (pieces.empty()) return true;
  const auto address = [this](std::uint64_t chunk) { return static_cast<char*>(base_) + chunk * chunk_bytes_; };
  // Runs of adjacent pieces: one access change (cuda) or protection change (host) each.
  const auto for_each_run = [&](std::size_t count, auto&& change) {
    bool ok = true;
    for (std::size_t run = 0; ok && run < count;) {
      std::size_t end = run + 1;
      while (end < count && pieces[end].first == pieces[end - 1].first + pieces[end - 1].chunks) ++end;
      ok = change(pieces[run].first, pieces[end - 1].first + pieces[end - 1].chunks - pieces[run].first);
      run = end;
    }
    return ok;
  };
  if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
    const VirtualMemoryDriver& driver = VirtualMemoryDriver::get();
    const CUmemAllocationProp prop = VirtualMemoryDriver::properties(device_);
    std::size_t mapped = 0;  // pieces with a handle mapped so far
    CUresult status = CUDA_SUCCESS;
    for (; mapped < pieces.size(); ++mapped) {
      Piece& piece = pieces[mapped];
      CUmemGenericAllocationHandle handle = 0;
      status = driver.create(&handle, piece.chunks * chunk_bytes_, &prop, 0);
      if (status != CUDA_SUCCESS) break;
      status = driver.map(reinterpret_cast<CUdeviceptr>(address(piece.first)), piece.chunks * chunk_bytes_, 0, handle, 0);
      if (status != CUDA_SUCCESS) {
        driver.release(handle);
        break;
      }
      piece.handle = static_cast<std::uint64_t>(handle);
    }
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = device_;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (status == CUDA_SUCCESS)
      for_each_run(pieces.size(), [&](std::uint64_t chunk, std::uint64_t chunks) {
        status = driver.set_access(reinterpret_cast<CUdeviceptr>(address(chunk)), chunks * chunk_bytes_, &access, 1);
        return status == CUDA_SUCCESS;
      });
    if (status != CUDA_SUCCESS) {  // undo every piece of this call
      for (std::size_t i = 0; i < mapped; ++i) {
        driver.unmap(reinterpret_cast<CUdeviceptr>(address(pieces[i].first)), pieces[i].chunks * chunk_bytes_);
        driver.release(static_cast<CUmemGenericAllocationHandle>(pieces[i].handle));
      }
      if (status == CUDA_ERROR_OUT_OF_MEMORY) return false;
      VirtualMemoryDriver::check(status, "cuMemCreate/cuMemMap/cuMemSetAccess");
    }
#endif
  } else {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> done;  // runs made accessible so far
    const bool ok = for_each_run(pieces.size(), [&](std::uint64_t chunk, std::uint64_t chunks) {
      if (mprotect(address(chunk), chunks * chunk_bytes_, PROT_READ | PROT_WRITE) != 0) return false;
      done.emplace_back(chunk, chunks);
      return true;
    });
    if (!ok) {
      for (const auto& [chunk, chunks] : done) mprotect(address(chunk), chunks * chunk_bytes_, PROT_NONE);
      return false;
    }
  }
  for (const Piece& piece : pieces) {
    for (std::uint64_t chunk = piece.first; chunk < piece.first + piece.chunks; ++chunk) {
      chunks_[chunk].committed = true;
      chunks_[chunk].piece_first = piece.first;
    }
    chunks_[piece.first].piece_chunks = piece.chunks;
    chunks_[piece.first].handle = piece.handle;
    committed_ += piece.chunks;
  }
  return true;
}

inline void ReservedRange::release(std::uint64_t chunk) {
  check_chunk(chunk, "release");
  if (!chunks_[chunk].committed) return;
  const std::uint64_t first = chunks_[chunk].piece_first;
  Chunk& piece = chunks_[first];
  const std::uint64_t bytes = piece.piece_chunks * chunk_bytes_;
  char* address = static_cast<char*>(base_) + first * chunk_bytes_;
  if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
    const VirtualMemoryDriver& driver = VirtualMemoryDriver::get();
    VirtualMemoryDriver::check(driver.unmap(reinterpret_cast<CUdeviceptr>(address), bytes), "cuMemUnmap");
    VirtualMemoryDriver::check(driver.release(static_cast<CUmemGenericAllocationHandle>(piece.handle)), "cuMemRelease");
#endif
  } else {
    // The pages go back to the system first; without access a stray touch faults instead of
    // silently bringing a zero page back.
    if (madvise(address, bytes, MADV_DONTNEED) != 0 || mprotect(address, bytes, PROT_NONE) != 0)
      throw usage_error("soaheap: giving back chunk " + std::to_string(chunk) + " of a reserved range failed (madvise/mprotect)");
  }
  const std::uint64_t count = piece.piece_chunks;
  for (std::uint64_t c = first; c < first + count; ++c) chunks_[c] = Chunk{};
  committed_ -= count;
}

inline void ReservedRange::reset() noexcept {
  if (base_ == nullptr) return;
  const std::uint64_t total = reserved_bytes();
  if (backend_ == Backend::cuda) {
#if SOAHEAP_HAS_CUDA
    const VirtualMemoryDriver& driver = VirtualMemoryDriver::get();
    for (std::uint64_t chunk = 0; chunk < chunk_count(); chunk += std::max<std::uint64_t>(chunks_[chunk].piece_chunks, 1)) {
      if (!chunks_[chunk].committed) continue;
      driver.unmap(reinterpret_cast<CUdeviceptr>(static_cast<char*>(base_) + chunk * chunk_bytes_),
                   chunks_[chunk].piece_chunks * chunk_bytes_);
      driver.release(static_cast<CUmemGenericAllocationHandle>(chunks_[chunk].handle));
    }
    driver.address_free(reinterpret_cast<CUdeviceptr>(base_), total);
#endif
  } else {
    munmap(base_, total);
  }
  base_ = nullptr;
  chunks_.clear();
  committed_ = 0;
}

}  // namespace soaheap::detail
