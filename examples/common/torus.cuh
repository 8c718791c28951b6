#pragma once
/// @file torus.cuh
/// @brief The four neighbours of a cell on a wrapped-around grid (sugarscape, wa_tor and its
///        baseline), so that applications and baselines agree on the directions' order.

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap_app {

/// @brief The cell next to @p cell (index y * width + x) in @p direction: 0 north, 1 east,
///        2 south, 3 west; the grid wraps around at its edges.
SOAHEAP_HD inline std::uint32_t torus_neighbour(std::uint32_t cell, int direction, std::uint32_t width,
                                                std::uint32_t height) {
  const std::uint32_t x = cell % width, y = cell / width;
  switch (direction) {
    case 0: return ((y + height - 1) % height) * width + x;
    case 1: return y * width + (x + 1) % width;
    case 2: return ((y + 1) % height) * width + x;
    default: return y * width + (x + width - 1) % width;
  }
}

}  // namespace soaheap_app
