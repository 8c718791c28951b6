#pragma once
/// @file cell_arrays.cuh
/// @brief The per-cell arrays of a hand-written baseline (one array per field, no allocator), in
///        the memory of one backend: created one by one, read back by the self-check.

#include <soaheap/core/backend.cuh>
#include <soaheap/core/errors.hpp>
#include <soaheap/core/memory.cuh>

#include <cstdint>
#include <string>
#include <vector>

namespace soaheap_app {

/// @brief Owns arrays of `cells` elements each in the memory of one backend.
class CellArrays {
 public:
  CellArrays(soaheap::Backend backend, std::uint64_t cells) : backend_(backend), cells_(cells) {}

  /// @brief A new array of one T per cell (uninitialized); valid as long as this object.
  template <class T>
  T* add() {
    memory_.emplace_back(backend_, cells_ * sizeof(T));
    return memory_.back().template as<T>();
  }

  /// @brief The contents of @p array, one returned by add(), on the host. Call after the kernels
  /// that write it are done.
  /// @throw soaheap::usage_error if @p array is not one of this object's arrays
  template <class T>
  std::vector<T> to_host(const T* array) const {
    for (const soaheap::detail::Memory& memory : memory_) {
      if (memory.get() != array) continue;
      std::vector<T> values(cells_);
      memory.copy_to_host(values.data(), 0, cells_ * sizeof(T));
      return values;
    }
    throw soaheap::usage_error("CellArrays::to_host: " + std::to_string(reinterpret_cast<std::uintptr_t>(array)) +
                               " is not an array of this object");
  }

  std::uint64_t cells() const { return cells_; }

  /// @brief Bytes of all arrays together.
  std::uint64_t bytes() const {
    std::uint64_t total = 0;
    for (const soaheap::detail::Memory& memory : memory_) total += memory.bytes();
    return total;
  }

 private:
  soaheap::Backend backend_;
  std::uint64_t cells_;
  std::vector<soaheap::detail::Memory> memory_;
};

}  // namespace soaheap_app
