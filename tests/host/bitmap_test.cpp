// Hierarchical bitmap: semantics of every operation, and consistency under real contention.
#include <soaheap/core/bitmap.cuh>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace {

struct OwnedBitmap {
  explicit OwnedBitmap(std::uint64_t bits)
      : shape(soaheap::BitmapShape::for_bits(bits)), words(shape.total_words, 0), view(words.data(), shape) {}
  soaheap::BitmapShape shape;
  std::vector<std::uint64_t> words;
  soaheap::BitmapView view;

  /// Every upper-level bit says whether the word below it is non-empty.
  bool consistent() const {
    for (int level = 0; level + 1 < shape.level_count; ++level)
      for (std::uint64_t w = 0; w < shape.level_words[level]; ++w)
        if (((view.word(level + 1, w / 64) >> (w % 64)) & 1u) != (view.word(level, w) != 0)) return false;
    return true;
  }
  std::set<std::uint64_t> set_bits() const {
    std::set<std::uint64_t> result;
    for (std::uint64_t i = 0; i < shape.bit_count; ++i)
      if (view.get(i)) result.insert(i);
    return result;
  }
};

TEST(BitmapShape, LevelsShrinkBy64UntilOneWord) {
  const auto shape = soaheap::BitmapShape::for_bits(64 * 64 * 64 + 1);
  EXPECT_EQ(shape.level_count, 4);
  EXPECT_EQ(shape.level_words[0], 64u * 64u + 1u);
  EXPECT_EQ(shape.level_words[3], 1u);
  EXPECT_EQ(soaheap::BitmapShape::for_bits(1).level_count, 1);
  EXPECT_EQ(soaheap::BitmapShape::for_bits(65).level_count, 2);
}

TEST(BitmapView, RecomputedLevelOffsetsMatchTheShape) {
  for (const std::uint64_t bits : {1ull, 63ull, 64ull, 65ull, 4095ull, 4096ull, 4097ull, 262143ull, 262145ull,
                                   (1ull << 24) + 7, (1ull << 30) + 1}) {
    const soaheap::BitmapShape shape = soaheap::BitmapShape::for_bits(bits);
    std::uint64_t dummy = 0;
    const soaheap::BitmapView view(&dummy, shape);
    EXPECT_EQ(view.level_count(), shape.level_count) << bits;
    EXPECT_EQ(view.size(), bits);
    for (int level = 0; level < shape.level_count; ++level)
      EXPECT_EQ(view.level_offset(level), shape.level_offset[level]) << "bits " << bits << " level " << level;
  }
}

TEST(BitmapView, NextMarkedWordIsTheFirstNonEmptyWordAtOrAfterItsStart) {
  // Three levels; set bits in a few words, in and across level-1 words, and scan from every word.
  OwnedBitmap bitmap(64 * 64 * 3 + 100);
  ASSERT_EQ(bitmap.shape.level_count, 3);
  std::mt19937_64 random(7);
  for (int i = 0; i < 20; ++i) bitmap.view.set(random() % bitmap.shape.bit_count);
  bitmap.view.set(0);
  bitmap.view.set(bitmap.shape.bit_count - 1);
  ASSERT_TRUE(bitmap.consistent());
  const std::uint64_t words = bitmap.shape.level_words[0];
  for (const std::uint64_t limit : {words, words - 70, std::uint64_t{64}, std::uint64_t{1}}) {
    for (std::uint64_t from = 0; from <= words; ++from) {
      std::uint64_t expected = from;
      while (expected < limit && bitmap.view.word(0, expected) == 0) ++expected;
      const std::uint64_t got = bitmap.view.next_marked_word(from, limit);
      if (expected >= limit) EXPECT_GE(got, limit) << "from " << from << " limit " << limit;
      else EXPECT_EQ(got, expected) << "from " << from << " limit " << limit;
    }
  }
  // One level: no summary to skip by, every word is a candidate.
  OwnedBitmap flat(64);
  EXPECT_EQ(flat.view.next_marked_word(0, 1), 0u);
  EXPECT_EQ(flat.view.next_marked_word(1, 1), 1u);
}

TEST(BitPicking, NthSetBitFindsThePositionOfEachSetBit) {
  std::mt19937_64 random(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::uint64_t value = random() & random();  // about a quarter of the bits
    if (trial % 3 == 0) value |= std::uint64_t{1} << 63;
    std::vector<int> positions;
    for (int bit = 0; bit < 64; ++bit)
      if ((value >> bit) & 1u) positions.push_back(bit);
    for (std::size_t n = 0; n < positions.size(); ++n)
      ASSERT_EQ(soaheap::detail::nth_set_bit(value, static_cast<int>(n)), positions[n]) << std::hex << value << " n " << n;
  }
  EXPECT_EQ(soaheap::detail::nth_set_bit(~std::uint64_t{0}, 63), 63);
  EXPECT_EQ(soaheap::detail::nth_set_bit(std::uint64_t{1} << 40, 0), 40);
}

TEST(BitPicking, EverySetBitIsEquallyLikely) {
  // Set bits that lie together: a pick that rotates to a seed-chosen position and takes the next set
  // bit would give bit 60 (after the run of clear bits) 57 of every 64 picks.
  const std::uint64_t value = 0xfull | (std::uint64_t{1} << 60);
  std::map<int, int> picks;
  constexpr int kSeeds = 64000;
  for (std::uint32_t seed = 0; seed < kSeeds; ++seed) ++picks[soaheap::detail::pick_set_bit(value, seed)];
  ASSERT_EQ(picks.size(), 5u);
  for (const auto& [bit, count] : picks) {
    EXPECT_TRUE((value >> bit) & 1u) << bit;
    EXPECT_NEAR(count, kSeeds / 5, kSeeds / 50) << "bit " << bit;
  }
  EXPECT_EQ(soaheap::detail::pick_set_bit(0, 5), -1);
}

TEST(BitPicking, RotatingPickTakesTheFirstSetBitAtOrAfterTheSeedsPosition) {
  using soaheap::detail::BitPick;
  const std::uint64_t value = 0xfull | (std::uint64_t{1} << 60);
  for (std::uint32_t seed = 0; seed < 256; ++seed) {
    const int position = static_cast<int>(seed % 64);
    const int expected = position <= 3 ? position : position <= 60 ? 60 : 0;  // wraps around past bit 63
    ASSERT_EQ(soaheap::detail::pick_set_bit(value, seed, BitPick::rotating), expected) << "seed " << seed;
  }
  EXPECT_EQ(soaheap::detail::pick_set_bit(0, 5, BitPick::rotating), -1);
  EXPECT_EQ(soaheap::detail::pick_set_bit(std::uint64_t{1} << 63, 0, BitPick::rotating), 63);

  // Through a three-level bitmap: every lookup lands on a set bit, and clear_any takes them all.
  OwnedBitmap bitmap(262'144);
  std::mt19937_64 random(2);
  std::set<std::uint64_t> set;
  while (set.size() < 300) set.insert(random() % bitmap.shape.bit_count);
  for (const std::uint64_t bit : set) bitmap.view.set(bit);
  for (std::uint32_t seed = 0; seed < 2000; ++seed) {
    const std::uint64_t position = bitmap.view.try_find_set(seed, soaheap::BitmapView::kMaxLevelsAny, BitPick::rotating);
    ASSERT_TRUE(set.count(position)) << position;
  }
  std::set<std::uint64_t> cleared;
  for (std::uint32_t seed = 0; seed < set.size(); ++seed)
    cleared.insert(bitmap.view.clear_any(seed * 77u, soaheap::BitmapView::kMaxLevelsAny, BitPick::rotating));
  EXPECT_EQ(cleared, set);
  EXPECT_TRUE(bitmap.view.appears_empty());
  EXPECT_TRUE(bitmap.consistent());
}

TEST(BitPicking, LookupsReachEverySetBitOfAThreeLevelBitmap) {
  // Seeds as reserve() makes them (a warp's seed, then its five lookups); each level must pick with a
  // hash of its own: a pick whose levels' hashes are related (mix_seed of seed + level alone, rotating
  // or uniform) left 93-97 % of these set bits unreached and sent up to 400 times the mean to one
  // (decision 029).
  OwnedBitmap bitmap(262'144);
  ASSERT_EQ(bitmap.shape.level_count, 3);
  std::mt19937_64 random(1);
  std::vector<std::uint64_t> set;
  for (std::uint64_t bit = 0; bit < bitmap.shape.bit_count; ++bit)
    if (random() % 10 < 3) {
      bitmap.view.set(bit);
      set.push_back(bit);
    }
  constexpr int kLookupsPerBit = 20;
  std::vector<std::uint32_t> hits(bitmap.shape.bit_count, 0);
  for (std::size_t warp = 0; warp < set.size() * kLookupsPerBit / 5; ++warp) {
    const std::uint32_t seed = soaheap::detail::mix_seed(random());
    for (std::uint32_t lookup = 0; lookup < 5; ++lookup) {
      const std::uint64_t position = bitmap.view.try_find_set(seed + lookup * 0x632be5abu);
      ASSERT_LT(position, bitmap.shape.bit_count);
      ++hits[position];
    }
  }
  std::size_t never = 0;
  std::uint32_t most = 0;
  for (const std::uint64_t bit : set) {
    never += hits[bit] == 0 ? 1 : 0;
    most = std::max(most, hits[bit]);
  }
  EXPECT_EQ(never, 0u) << "of " << set.size() << " set bits";
  EXPECT_LT(most, 5u * kLookupsPerBit) << "most lookups on one bit";
}

TEST(Bitmap, SetClearTryAndGet) {
  OwnedBitmap bitmap(10000);
  EXPECT_TRUE(bitmap.view.appears_empty());
  EXPECT_TRUE(bitmap.view.try_set(4097));
  EXPECT_FALSE(bitmap.view.try_set(4097));
  EXPECT_TRUE(bitmap.view.get(4097));
  EXPECT_FALSE(bitmap.view.get(4096));
  EXPECT_FALSE(bitmap.view.appears_empty());
  EXPECT_TRUE(bitmap.consistent());
  EXPECT_TRUE(bitmap.view.try_clear(4097));
  EXPECT_FALSE(bitmap.view.try_clear(4097));
  EXPECT_TRUE(bitmap.view.appears_empty());
  EXPECT_TRUE(bitmap.consistent());
  bitmap.view.set(9999);
  bitmap.view.set(9999);  // idempotent
  bitmap.view.clear(0);   // clearing a clear bit is harmless
  EXPECT_EQ(bitmap.set_bits(), (std::set<std::uint64_t>{9999}));
  bitmap.view.assign(5, true);
  bitmap.view.assign(9999, false);
  EXPECT_EQ(bitmap.set_bits(), (std::set<std::uint64_t>{5}));
  EXPECT_TRUE(bitmap.consistent());
}

TEST(Bitmap, FindSetAndClearAnyWithRotation) {
  OwnedBitmap bitmap(5000);
  EXPECT_EQ(bitmap.view.try_find_set(1), soaheap::BitmapView::kNotFound);
  EXPECT_EQ(bitmap.view.clear_any(1), soaheap::BitmapView::kNotFound);
  const std::set<std::uint64_t> expected = {3, 64, 700, 4999};
  for (auto bit : expected) bitmap.view.set(bit);
  std::set<std::uint64_t> found;
  for (std::uint32_t seed = 0; seed < 200; ++seed) {
    const auto position = bitmap.view.try_find_set(seed);
    ASSERT_TRUE(expected.count(position)) << position;
    found.insert(position);
  }
  EXPECT_EQ(found, expected) << "rotation should reach every set bit";
  std::set<std::uint64_t> cleared;
  for (std::size_t i = 0; i < expected.size(); ++i) cleared.insert(bitmap.view.clear_any(static_cast<std::uint32_t>(i)));
  EXPECT_EQ(cleared, expected);
  EXPECT_EQ(bitmap.view.clear_any(7), soaheap::BitmapView::kNotFound);
  EXPECT_TRUE(bitmap.consistent());
}

TEST(Bitmap, ConcurrentSetClearStormEndsConsistent) {
  // Few bits per word and many threads: emptiness of words flips constantly, so parent updates race.
  OwnedBitmap bitmap(64 * 64 * 3);
  const unsigned threads = std::max(4u, std::thread::hardware_concurrency() * 2);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&bitmap, t] {
      std::mt19937_64 random(t);
      for (int i = 0; i < 200000; ++i) {
        const std::uint64_t bit = (random() % 48) * 64 + (random() % 2);  // 2 bits in each of 48 words
        if (random() % 2) bitmap.view.set(bit); else bitmap.view.clear(bit);
      }
    });
  }
  for (auto& worker : workers) worker.join();
  EXPECT_TRUE(bitmap.consistent());
}

/// Takes bits with clear_any on many threads until the bitmap is empty and @p feed, run on this
/// thread meanwhile, has returned; checks that every one of its @p bits bits was handed out once.
void expect_each_bit_taken_once(OwnedBitmap& bitmap, std::uint64_t bits, const std::function<void()>& feed) {
  const unsigned threads = std::max(4u, std::thread::hardware_concurrency() * 2);
  std::atomic<bool> feeding{true};
  std::vector<std::vector<std::uint64_t>> taken(threads);
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (std::uint32_t seed = t * 7919u;; ++seed) {
        const auto position = bitmap.view.clear_any(seed);
        if (position != soaheap::BitmapView::kNotFound) taken[t].push_back(position);
        else if (!feeding.load() && bitmap.view.appears_empty()) break;
        else std::this_thread::yield();
      }
    });
  }
  feed();
  feeding = false;
  for (auto& worker : workers) worker.join();
  std::vector<bool> seen(bits, false);
  std::uint64_t total = 0;
  for (const auto& list : taken)
    for (auto position : list) {
      ASSERT_LT(position, bits);
      ASSERT_FALSE(seen[position]) << "bit " << position << " handed out twice";
      seen[position] = true;
      ++total;
    }
  EXPECT_EQ(total, bits) << "every bit is found";
  EXPECT_TRUE(bitmap.consistent());
}

TEST(Bitmap, ConcurrentClearAnyHandsOutEachBitOnce) {
  const std::uint64_t bits = 100000;
  OwnedBitmap bitmap(bits);
  for (std::uint64_t i = 0; i < bits; ++i) bitmap.view.set(i);
  expect_each_bit_taken_once(bitmap, bits, [] {});
}

TEST(Bitmap, RunsAppendedWhileOthersTakeBitsAreHandedOutOnceAndStayConsistent) {
  // A growing heap's free bitmap: one thread appends runs (first words shared with the run before,
  // parents of several levels new), the others take bits as they appear and empty the shared words.
  const std::uint64_t bits = 64 * 64 * 5 + 37;
  OwnedBitmap bitmap(bits);
  expect_each_bit_taken_once(bitmap, bits, [&] {
    std::mt19937_64 random(5);
    for (std::uint64_t from = 0; from < bits;) {
      const std::uint64_t to = std::min(bits, from + 1 + random() % 700);
      bitmap.view.set_new_run(from, to);
      from = to;
      if (random() % 4 == 0) std::this_thread::yield();
    }
  });
}

}  // namespace
