#pragma once
/// @file migration_stats.hpp
/// @brief What a migration step reports (MigrationStats) and where arrivals go (MigrationOptions).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace soaheap::distributed {

/// @brief What one migrate call moved on this rank (objects and bytes per peer and in total).
struct MigrationStats {
  std::vector<std::uint64_t> sent_to;        ///< objects sent to each rank
  std::vector<std::uint64_t> received_from;  ///< objects received from each rank
  std::uint64_t sent = 0;
  std::uint64_t received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  double seconds = 0;  ///< wall time of the call, host clock (it waits for its kernels)
  /// Times the call waited for the device (each also brings what kernels published to the host):
  /// 2 per step once the scratch buffers fit, 3 in a step whose messages outgrew the send buffer.
  std::uint64_t host_syncs = 0;

  /// Adds @p other's figures (e.g. to total many migration steps).
  MigrationStats& operator+=(const MigrationStats& other) {
    if (sent_to.size() < other.sent_to.size()) sent_to.resize(other.sent_to.size(), 0);
    if (received_from.size() < other.received_from.size()) received_from.resize(other.received_from.size(), 0);
    for (std::size_t p = 0; p < other.sent_to.size(); ++p) sent_to[p] += other.sent_to[p];
    for (std::size_t p = 0; p < other.received_from.size(); ++p) received_from[p] += other.received_from[p];
    sent += other.sent;
    received += other.received;
    bytes_sent += other.bytes_sent;
    bytes_received += other.bytes_received;
    seconds += other.seconds;
    host_syncs += other.host_syncs;
    return *this;
  }
};

/// @brief Where arriving objects go in the receiver's heap.
enum class MigrationPlacement {
  /// Into free slots of the class's blocks, as `new` would place them (the default): the slots that
  /// departures leave are reused, so the heap does not grow.
  fill_holes,
  /// Into free blocks taken whole, N_C arrivals per block, written densely (slots that departures
  /// left stay free for `new` and defragmentation). Arrivals that find no free block fill holes.
  fresh_blocks,
};

struct MigrationOptions {
  MigrationPlacement placement = MigrationPlacement::fill_holes;
};

}  // namespace soaheap::distributed
