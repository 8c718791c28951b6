#pragma once
/// @file detail/block_runs.cuh
/// @brief Runs of contiguous free blocks: finding one in the heap's free bitmap and claiming it
///        word by word. Untyped requests larger than a block take such runs.

#include <soaheap/base/portability.cuh>
#include <soaheap/core/bitmap.cuh>

#include <cstdint>

namespace soaheap::detail {

/// Index of the highest set bit of @p value (which must not be 0).
SOAHEAP_HD inline int highest_set_bit(std::uint64_t value) {
#if SOAHEAP_DEVICE_CODE
  return 63 - __clzll(static_cast<long long>(value));
#else
  return 63 - __builtin_clzll(value);
#endif
}

/// Number of leading (most significant) one bits of @p value.
SOAHEAP_HD inline int leading_ones(std::uint64_t value) {
  return value == ~std::uint64_t{0} ? 64 : 63 - highest_set_bit(~value);
}

/// Bit i of the result is set when bits i .. i+length-1 of @p value are all set (1 <= length <= 64).
SOAHEAP_HD inline std::uint64_t run_starts(std::uint64_t value, int length) {
  int covered = 1;
  while (covered * 2 <= length) {
    value &= value >> covered;
    covered *= 2;
  }
  if (covered < length) value &= value >> (length - covered);
  return value;
}

/// First block of @p length contiguous free blocks, scanning from word @p start_word round the
/// heap (a run never wraps), or kNotFound. Upper bitmap levels skip empty regions 4096 blocks at a
/// time. With @p max_words, only that many words from @p start_word on are looked at (no wrap).
template <class View>
SOAHEAP_HD std::uint64_t find_run(const View& view, std::uint64_t length, std::uint64_t start_word,
                                  std::uint64_t max_words = ~std::uint64_t{0}) {
  const BitmapView free_bits = view.free_blocks();
  const std::uint64_t words = view.block_words();
  const bool has_summary = view.bitmap_shape.level_count > 1;
  const bool bounded = max_words < words;
  for (int pass = 0; pass < (bounded ? 1 : 2); ++pass) {
    const std::uint64_t begin = pass == 0 ? start_word : 0;
    // The second pass runs past start_word far enough to find a run that crosses it.
    const std::uint64_t overlap = start_word + (length + 63) / 64 + 1;
    const std::uint64_t window_end = bounded && words - start_word > max_words ? start_word + max_words : words;
    const std::uint64_t end = pass == 0 ? window_end : (overlap < words ? overlap : words);
    std::uint64_t run = 0;        // free blocks that end at the current word boundary
    std::uint64_t run_first = 0;  // where they begin
    for (std::uint64_t w = begin; w < end; ++w) {
      if (has_summary && w % 64 == 0 && atomic_load(&free_bits.word(1, w / 64)) == 0) {
        run = 0;
        w += 63;
        continue;
      }
      const std::uint64_t value = atomic_load(&free_bits.word(0, w));
      if (value == ~std::uint64_t{0}) {
        if (run == 0) run_first = w * 64;
        run += 64;
        if (run >= length) return run_first;
        continue;
      }
      const std::uint64_t trailing = static_cast<std::uint64_t>(lowest_set_bit(~value));
      if (run > 0 && run + trailing >= length) return run_first;
      if (length <= 64) {
        const std::uint64_t starts = run_starts(value, static_cast<int>(length));
        if (starts != 0) return w * 64 + static_cast<std::uint64_t>(lowest_set_bit(starts));
      }
      run = static_cast<std::uint64_t>(leading_ones(value));
      run_first = w * 64 + 64 - run;
    }
  }
  return BitmapView::kNotFound;
}

/// Mask of the blocks of [first, first + length) that lie in level-0 word @p word.
SOAHEAP_HD inline std::uint64_t run_mask(std::uint64_t word, std::uint64_t first, std::uint64_t length) {
  const std::uint64_t lo = first > word * 64 ? first - word * 64 : 0;
  const std::uint64_t end = first + length;
  const std::uint64_t hi = end < word * 64 + 64 ? end - word * 64 : 64;
  return low_bits(static_cast<int>(hi)) & ~low_bits(static_cast<int>(lo));
}

/// Sets the bits of blocks [first, first + length) in @p bits, one atomic per word.
SOAHEAP_HD inline void set_run_bits(const BitmapView& bits, std::uint64_t first, std::uint64_t length) {
  for (std::uint64_t w = first / 64; w <= (first + length - 1) / 64; ++w) bits.set_in_word(w, run_mask(w, first, length));
}
/// Clears the bits of blocks [first, first + length) in @p bits, one atomic per word.
SOAHEAP_HD inline void clear_run_bits(const BitmapView& bits, std::uint64_t first, std::uint64_t length) {
  for (std::uint64_t w = first / 64; w <= (first + length - 1) / 64; ++w) bits.clear_in_word(w, run_mask(w, first, length));
}
/// Sets (@p value) or clears the bits of blocks [first, first + length) in level 0 of @p bits
/// alone, a bitmap that keeps no upper levels (BitmapView::assign_in_level0_word).
SOAHEAP_HD inline void assign_run_bits_in_level0(const BitmapView& bits, std::uint64_t first, std::uint64_t length, bool value) {
  for (std::uint64_t w = first / 64; w <= (first + length - 1) / 64; ++w)
    bits.assign_in_level0_word(w, run_mask(w, first, length), value);
}

/// Clears the free bits of [first, first + length) word by word; if another thread owned one of
/// them first, gives back what it took and returns false.
template <class View>
SOAHEAP_HD bool claim_run(const View& view, std::uint64_t first, std::uint64_t length) {
  const BitmapView free_bits = view.free_blocks();
  const std::uint64_t first_word = first / 64;
  const std::uint64_t last_word = (first + length - 1) / 64;
  for (std::uint64_t w = first_word; w <= last_word; ++w) {
    const std::uint64_t mask = run_mask(w, first, length);
    const std::uint64_t taken = free_bits.clear_in_word(w, mask) & mask;
    if (taken == mask) continue;
    if (taken != 0) free_bits.set_in_word(w, taken);
    for (std::uint64_t back = first_word; back < w; ++back) free_bits.set_in_word(back, run_mask(back, first, length));
    return false;
  }
  return true;
}

}  // namespace soaheap::detail
