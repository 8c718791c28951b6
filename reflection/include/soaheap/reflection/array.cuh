#pragma once
/// @file array.cuh
/// @brief `soaheap::array<T, N>`: a fixed-size array usable as a field type on host and device.

#include <soaheap/base/portability.cuh>

#include <type_traits>

namespace soaheap {

/// @brief Fixed-size array field type (e.g. `array<Node*, 4>` for a node's neighbours).
/// Reflection recognises arrays of managed-class pointers and rewrites them during defragmentation.
template <class T, int N>
struct array {
  static_assert(N > 0, "soaheap::array needs at least one element");
  using value_type = T;
  static constexpr int extent = N;
  T items[N];

  SOAHEAP_HD T& operator[](int index) { return items[index]; }
  SOAHEAP_HD const T& operator[](int index) const { return items[index]; }
  SOAHEAP_HD static constexpr int size() { return N; }
  SOAHEAP_HD T* begin() { return items; }
  SOAHEAP_HD T* end() { return items + N; }
};

template <class T>
struct is_soaheap_array : std::false_type {};
template <class T, int N>
struct is_soaheap_array<array<T, N>> : std::true_type {};

}  // namespace soaheap
