#pragma once
/// @file release_backoff.hpp
/// @brief `ReleaseBackoff`: when the policies may give a growable heap's free memory back
///        (`release_memory`), as a plain class fed with the heap's mapped blocks at each call.
///
/// Memory that a compaction frees is often needed again an iteration later: objects created and
/// destroyed within each iteration (game_of_life's candidates) or a kernel whose peak is above
/// what lives between kernels. Giving it back then costs twice — the release gathers the objects
/// at the heap's start (an ordered compaction of each class) and unmaps, and the next kernels wait
/// while the grower maps it again. So:
///  - a release waits until the heap has not grown for `quiet()` calls (iterations);
///  - the heap growing again within `quiet()` iterations after a release means it was needed:
///    the wait doubles, up to kMaxQuiet; a release the heap lives with for that long halves it,
///    down to kMinQuiet.
/// It reads no heap: DefragPolicy passes the mapped block count in (tests drive it with figures).

#include <algorithm>
#include <cstdint>

namespace soaheap {

class ReleaseBackoff {
 public:
  /// @brief Fewest iterations without growth before a release (also the first wait).
  static constexpr long long kMinQuiet = 2;
  /// @brief Most iterations the backoff waits once releases keep being mapped again.
  static constexpr long long kMaxQuiet = 1024;

  /// @brief The heap has @p mapped_blocks mapped at the policy's call for @p iteration.
  void observe(long long iteration, std::uint64_t mapped_blocks) {
    if (seen_ && mapped_blocks > mapped_blocks_) {
      last_growth_ = iteration;
      if (released_at_ >= 0) {  // mapped again within the wait: the release was premature
        quiet_ = std::min(2 * quiet_, kMaxQuiet);
        released_at_ = -1;
      }
    }
    if (released_at_ >= 0 && iteration - released_at_ >= quiet_) {  // the release held
      quiet_ = std::max(quiet_ / 2, kMinQuiet);
      released_at_ = -1;
    }
    if (!seen_) last_growth_ = iteration;
    seen_ = true;
    mapped_blocks_ = mapped_blocks;
  }

  /// @brief Whether a release may happen at @p iteration (call observe() first).
  bool due(long long iteration) const { return seen_ && iteration - last_growth_ >= quiet_; }

  /// @brief A release at @p iteration left @p mapped_blocks mapped.
  void released(long long iteration, std::uint64_t mapped_blocks) {
    released_at_ = iteration;
    mapped_blocks_ = mapped_blocks;
  }

  /// @brief Iterations without growth that a release waits for now.
  long long quiet() const { return quiet_; }

 private:
  bool seen_ = false;
  std::uint64_t mapped_blocks_ = 0;  ///< at the last call (or after the last release)
  long long last_growth_ = 0;        ///< the last call that saw the heap grown
  long long released_at_ = -1;       ///< the last release not yet judged (-1: none)
  long long quiet_ = kMinQuiet;
};

}  // namespace soaheap
