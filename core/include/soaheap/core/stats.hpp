#pragma once
/// @file stats.hpp
/// @brief Per-class heap statistics (what `heap.stats()` returns).

#include <soaheap/core/untyped_stats.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace soaheap {

/// @brief Occupancy of one class's blocks.
struct ClassStats {
  std::string name;
  int class_id = 0;
  int capacity = 0;                     ///< N_T, objects per block
  bool abstract = false;
  std::uint64_t allocated_blocks = 0;
  std::uint64_t used_slots = 0;         ///< live objects
  std::uint64_t active_blocks = 0;      ///< blocks with a free slot
  std::uint64_t candidate_blocks = 0;   ///< defragmentation candidates (fill ≤ n/(n+1))

  std::uint64_t allocated_slots() const { return allocated_blocks * static_cast<std::uint64_t>(capacity); }
  /// @brief F of the ISMM paper: the fraction of allocated slots that hold no object (0 when nothing is allocated).
  double fragmentation() const {
    const std::uint64_t slots = allocated_slots();
    return slots == 0 ? 0.0 : 1.0 - static_cast<double>(used_slots) / static_cast<double>(slots);
  }
};

/// @brief Occupancy of the whole heap.
struct HeapStats {
  std::uint64_t block_count = 0;        ///< blocks with headers (a growable heap maps fewer)
  std::uint64_t mapped_blocks = 0;      ///< blocks with memory, published: free, allocated or untyped
  std::uint64_t free_blocks = 0;        ///< mapped blocks that nothing uses
  std::uint64_t block_bytes = 0;        ///< bytes of one block's data segment
  std::uint64_t heap_bytes = 0;         ///< data, headers and bitmaps mapped now
  std::uint64_t resident_bytes = 0;     ///< the same (kept apart for readers of memory over time)
  std::uint64_t metadata_bytes = 0;     ///< of resident_bytes: headers and bitmaps (the rest is data)
  std::uint64_t scratch_bytes = 0;      ///< beside them: the heap's enumeration lists and counters
  std::uint64_t max_bytes = 0;          ///< the most the heap may grow to (its size when fixed)
  std::vector<ClassStats> classes;
  UntypedStats untyped;                 ///< soaheap::malloc memory (its blocks are not in free_blocks)

  const ClassStats& of(const std::string& class_name) const {
    for (const auto& entry : classes)
      if (entry.name == class_name) return entry;
    throw std::out_of_range("no class named '" + class_name + "' in this heap");
  }
  std::uint64_t allocated_blocks() const {
    std::uint64_t total = 0;
    for (const auto& entry : classes) total += entry.allocated_blocks;
    return total;
  }
  /// @brief Fragmentation over all classes, weighted by allocated memory.
  double fragmentation() const {
    double unused = 0;
    for (const auto& entry : classes) unused += entry.fragmentation() * static_cast<double>(entry.allocated_blocks);
    const auto blocks = static_cast<double>(allocated_blocks());
    return blocks == 0 ? 0.0 : unused / blocks;
  }
};

}  // namespace soaheap
