#pragma once
/// @file bitmap.cuh
/// @brief Lock-free hierarchical bitmap: level 0 holds one bit per block; bit i of level l+1 says
///        whether 64-bit word i of level l has any bit set, so set bits are found top-down in a few
///        reads and enumeration skips empty regions.
///
/// Every operation is a bounded sequence of atomics. Parent bits are kept *eventually* consistent:
/// a thread whose atomic turned a word from zero to non-zero (or back) re-derives the parent bit
/// from the word and repeats until the word did not change meanwhile, so when all operations of a
/// kernel have finished every level agrees with the one below. Unlike DynaSOAr's set()/clear(),
/// no operation waits for the effect of another thread, which keeps the bitmap correct under
/// independent thread scheduling (a lane never spins on a lane of its own warp).

#include <soaheap/base/portability.cuh>

#include <cstdint>

namespace soaheap {

/// @brief Where the words of a hierarchical bitmap of a given size lie inside its storage.
struct BitmapShape {
  static constexpr int kMaxLevels = 8;
  std::uint64_t bit_count = 0;
  int level_count = 0;
  std::uint64_t level_offset[kMaxLevels] = {};  ///< first word of each level in the storage
  std::uint64_t level_words[kMaxLevels] = {};   ///< words in each level
  std::uint64_t total_words = 0;

  /// @brief Shape of a bitmap of @p bits bits (at least 1).
  static BitmapShape for_bits(std::uint64_t bits) {
    BitmapShape shape;
    shape.bit_count = bits;
    std::uint64_t level_bits = bits;
    do {
      const std::uint64_t words = (level_bits + 63) / 64;
      shape.level_offset[shape.level_count] = shape.total_words;
      shape.level_words[shape.level_count] = words;
      shape.total_words += words;
      ++shape.level_count;
      level_bits = words;
    } while (level_bits > 1);
    return shape;
  }

  /// @brief This shape without the levels above the first whose word 0 covers bits [0, @p bits):
  /// where the words lie stays the same. A growable heap shapes its bitmaps for its reservation
  /// (the whole GPU: five levels for 512-byte blocks) but uses only what covers its blocks; each
  /// level more is a dependent read in every search and an update in every word that empties.
  BitmapShape covering(std::uint64_t bits) const {
    BitmapShape shape = *this;
    const int needed = for_bits(bits < 1 ? 1 : bits).level_count;
    if (needed < shape.level_count) shape.level_count = needed;
    return shape;
  }
};

/// @brief A non-owning, trivially copyable view of a hierarchical bitmap (usable in kernels and host threads).
///
/// It keeps only scalars (no per-level arrays): the words of a level are found by walking up from
/// level 0, a few integer operations per level. An array indexed by a run-time level would make
/// the compiler place every copy of the view in local memory, which the allocation path used to
/// pay for with hundreds of local stores per kernel.
class BitmapView {
 public:
  static constexpr std::uint64_t kNotFound = ~std::uint64_t{0};
  /// Attempts of clear_any() to find and clear a bit before it gives up (others kept clearing them).
  static constexpr int kClearAnyAttempts = 64;
  /// A level above every bitmap's top: try_find_set picks at random on every level.
  static constexpr int kMaxLevelsAny = 64;

  BitmapView() = default;
  /// @param stride words from one word of this bitmap to the next: a heap keeps all its bitmaps of
  ///        one shape interleaved word by word (stride = their count), so that the words of every
  ///        bitmap for a range of blocks lie together and a heap that grows maps them at once.
  SOAHEAP_HD BitmapView(std::uint64_t* words, const BitmapShape& shape, std::uint32_t stride = 1)
      : words_(words), bit_count_(shape.bit_count), level0_words_(shape.level_words[0]), level_count_(shape.level_count),
        stride_(stride) {}

  SOAHEAP_HD std::uint64_t size() const { return bit_count_; }
  SOAHEAP_HD int level_count() const { return level_count_; }
  /// Level-0 word @p index (the bits of blocks 64·index to 64·index + 63).
  SOAHEAP_HD std::uint64_t* level0_word(std::uint64_t index) const { return &word(0, index); }

  SOAHEAP_HD bool get(std::uint64_t position) const {
    return (detail::atomic_load(&word(0, position / 64)) >> (position % 64)) & 1u;
  }
  /// @brief Sets the bit; true when this call changed it from 0 to 1.
  SOAHEAP_HD bool try_set(std::uint64_t position) const { return update(position, true); }
  /// @brief Clears the bit; true when this call changed it from 1 to 0.
  SOAHEAP_HD bool try_clear(std::uint64_t position) const { return update(position, false); }
  /// @brief Makes the bit 1 (whoever sets it first). Never waits for other threads.
  SOAHEAP_HD void set(std::uint64_t position) const { update(position, true); }
  /// @brief Makes the bit 0. Never waits for other threads.
  SOAHEAP_HD void clear(std::uint64_t position) const { update(position, false); }
  SOAHEAP_HD void assign(std::uint64_t position, bool value) const { update(position, value); }

  /// @brief Sets the bits of @p mask in level-0 word @p word_index at once; returns the word's
  /// previous value (runs of blocks are claimed and released a word at a time).
  SOAHEAP_HD std::uint64_t set_in_word(std::uint64_t word_index, std::uint64_t mask) const {
    return update_word(word_index, mask, true);
  }
  /// @brief Clears the bits of @p mask in level-0 word @p word_index at once; returns the previous value.
  SOAHEAP_HD std::uint64_t clear_in_word(std::uint64_t word_index, std::uint64_t mask) const {
    return update_word(word_index, mask, false);
  }
  /// @brief set_in_word / clear_in_word (@p value) on level 0 alone, for a bitmap that is only read
  /// bit by bit (get) and never searched: its upper levels are not kept (the heap's run bitmap).
  SOAHEAP_HD void assign_in_level0_word(std::uint64_t word_index, std::uint64_t mask, bool value) const {
    if (value) detail::atomic_fetch_or(&word(0, word_index), mask);
    else detail::atomic_fetch_and(&word(0, word_index), ~mask);
  }

  /// @brief Re-derives the upper levels above level-0 word @p word_index after its bits were written
  /// directly (a fixed heap writes its free bits by copy when it is made). Safe to repeat and
  /// to run from many threads at once.
  SOAHEAP_HD void refresh_parents(std::uint64_t word_index) const { propagate(0, word_index); }

  /// @brief Sets bits [@p from, @p to) and their parents: bits that were all clear and that no
  /// search could reach (a growing heap's new blocks). Bottom up — one store per level-0 word (an
  /// atomic or for the word it shares with bits below @p from), then one atomic or per parent word
  /// — so a search finds a bit only once its word is written. One caller at a time per range.
  /// Only the first word of each level can be emptied by other threads before its bit above is
  /// set (the others are unreachable until then, and whoever empties them later settles their
  /// parents itself), so only it is read back and settled.
  SOAHEAP_HD void set_new_run(std::uint64_t from, std::uint64_t to) const {
    if (to <= from) return;
    std::uint64_t first = from / 64, end = (to + 63) / 64;
    for (std::uint64_t w = first; w < end; ++w) {
      const int low = w == first ? static_cast<int>(from % 64) : 0;
      const int high = w + 1 == end && to % 64 != 0 ? static_cast<int>(to % 64) : 64;
      const std::uint64_t mask = detail::low_bits(high) & ~detail::low_bits(low);
      if (low != 0) detail::atomic_fetch_or(&word(0, w), mask);
      else detail::atomic_store(&word(0, w), mask);
    }
    for (int level = 0; level + 1 < level_count_; ++level) {
      const std::uint64_t parent_first = first / 64, parent_end = (end - 1) / 64 + 1;
      detail::memory_fence();  // the words below before their bits above
      for (std::uint64_t parent = parent_first; parent < parent_end; ++parent) {
        const std::uint64_t lo = first > parent * 64 ? first : parent * 64;
        const std::uint64_t hi = end < parent * 64 + 64 ? end : parent * 64 + 64;
        detail::atomic_fetch_or(&word(level + 1, parent),
                                detail::low_bits(static_cast<int>(hi - parent * 64)) & ~detail::low_bits(static_cast<int>(lo - parent * 64)));
      }
      detail::memory_fence();
      if (detail::atomic_load(&word(level, first)) == 0) propagate(level, first);
      first = parent_first;
      end = parent_end;
    }
  }

  /// @brief The first level-0 word at or after @p from whose bit on level 1 is set (@p from itself
  /// when the bitmap has no level 1), or a value >= @p limit: a scan of the words that hold a set
  /// bit, for one word index of state (device_do; the level-1 word is read again for each).
  SOAHEAP_HD std::uint64_t next_marked_word(std::uint64_t from, std::uint64_t limit) const {
    if (level_count_ < 2) return from;
    std::uint64_t at_or_after = ~std::uint64_t{0} << (from % 64);
    for (std::uint64_t summary = from / 64; summary * 64 < limit; ++summary, at_or_after = ~std::uint64_t{0}) {
      const std::uint64_t marked = detail::atomic_load(&word(1, summary)) & at_or_after;
      if (marked != 0) return summary * 64 + static_cast<std::uint64_t>(detail::lowest_set_bit(marked));
    }
    return limit;
  }

  /// @brief True when no bit appears set (exact when no operation is in flight).
  SOAHEAP_HD bool appears_empty() const { return detail::atomic_load(&word(level_count_ - 1, 0)) == 0; }

  /// @brief Position of some set bit, chosen top-down by @p seed (on each level by @p pick: every
  /// set bit of the word equally likely, or rotating), or kNotFound. Levels at or above
  /// @p lowest_from take their lowest set bit instead (the lowest region with a set bit, random
  /// inside it). May miss set bits while other threads are changing the bitmap; callers retry.
  SOAHEAP_HD std::uint64_t try_find_set(std::uint32_t seed, int lowest_from = kMaxLevelsAny,
                                        detail::BitPick pick = detail::BitPick::uniform) const {
    std::uint64_t index = 0;
    for (int level = level_count_ - 1; level >= 0; --level) {
      const std::uint64_t value = detail::atomic_load(&word(level, index));
      const int bit = level >= lowest_from
                          ? (value == 0 ? -1 : detail::lowest_set_bit(value))
                          : detail::pick_set_bit(value, detail::mix_seed(seed + static_cast<std::uint32_t>(level)), pick);
      if (bit < 0) return kNotFound;
      index = index * 64 + static_cast<std::uint64_t>(bit);
    }
    return index;
  }

  /// @brief Finds a set bit and clears it atomically; returns its position, or kNotFound when the
  /// bitmap is empty or every attempt lost its bit to another thread.
  SOAHEAP_HD std::uint64_t clear_any(std::uint32_t seed, int lowest_from = kMaxLevelsAny,
                                     detail::BitPick pick = detail::BitPick::uniform) const {
    for (int attempt = 0; attempt < kClearAnyAttempts; ++attempt) {
      const std::uint64_t position = try_find_set(seed + static_cast<std::uint32_t>(attempt) * 0x9e3779b9u, lowest_from, pick);
      if (position == kNotFound) {
        if (appears_empty()) return kNotFound;
        continue;
      }
      if (try_clear(position)) return position;
    }
    return kNotFound;
  }

  /// @brief Word @p index of level @p level (level 0 holds the bits themselves).
  SOAHEAP_HD std::uint64_t& word(int level, std::uint64_t index) const {
    return words_[(level_offset(level) + index) * stride_];
  }

  /// First word of @p level in the storage, in words of this bitmap (BitmapShape::level_offset, recomputed).
  SOAHEAP_HD std::uint64_t level_offset(int level) const {
    std::uint64_t offset = 0;
    std::uint64_t words = level0_words_;
    // Rolled: unrolled at each call site, this loop was two thirds of the machine code of a kernel
    // that calls soaheap::malloc (docs/decisions/008-allocation-path-inlined.md).
    SOAHEAP_NO_UNROLL
    for (int below = 0; below < level; ++below) {
      offset += words;
      words = (words + 63) / 64;
    }
    return offset;
  }

 private:
  SOAHEAP_HD bool update(std::uint64_t position, bool value) const {
    const std::uint64_t mask = std::uint64_t{1} << (position % 64);
    const std::uint64_t before = update_word(position / 64, mask, value);
    return value ? (before & mask) == 0 : (before & mask) != 0;
  }

  SOAHEAP_HD std::uint64_t update_word(std::uint64_t word_index, std::uint64_t mask, bool value) const {
    std::uint64_t* target = &word(0, word_index);
    const std::uint64_t before = value ? detail::atomic_fetch_or(target, mask) : detail::atomic_fetch_and(target, ~mask);
    const bool emptiness_flipped = mask != 0 && (value ? before == 0 : (before != 0 && (before & ~mask) == 0));
    if (emptiness_flipped) propagate(0, word_index);
    return before;
  }

  /// Re-derives parent bits after word (level, index) turned empty or non-empty, climbing while the
  /// parent word's own emptiness may have flipped.
  SOAHEAP_HD void propagate(int level, std::uint64_t index) const {
    while (level + 1 < level_count_) {
      std::uint64_t* child = &word(level, index);
      std::uint64_t* parent = &word(level + 1, index / 64);
      const std::uint64_t mask = std::uint64_t{1} << (index % 64);
      bool parent_may_have_flipped = false;
      for (;;) {
        detail::memory_fence();
        const bool child_nonempty = detail::atomic_load(child) != 0;
        const std::uint64_t before =
            child_nonempty ? detail::atomic_fetch_or(parent, mask) : detail::atomic_fetch_and(parent, ~mask);
        parent_may_have_flipped |= child_nonempty ? before == 0 : before == mask;
        detail::memory_fence();
        // Another thread may have flipped the child after we read it; its own propagate() might
        // have run before our write, so we settle the parent again from the fresh value.
        if ((detail::atomic_load(child) != 0) == child_nonempty) break;
      }
      if (!parent_may_have_flipped) return;
      index /= 64;
      ++level;
    }
  }

  std::uint64_t* words_ = nullptr;
  std::uint64_t bit_count_ = 0;
  std::uint64_t level0_words_ = 0;
  int level_count_ = 0;
  std::uint32_t stride_ = 1;
};

}  // namespace soaheap
