// The untyped-memory suite on the host backend (real threads; runs everywhere, also under TSan and ASan).
#include "tests/common/untyped_suite.inc"

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(Host, UntypedTest, ::testing::Values(soaheap::Backend::host), soaheap_test::backend_name);

// The region word's protocol (detail/current_region.cuh), step by step on one thread.
namespace region = soaheap::detail;

region::SlotClass class_of(int capacity, int span) { return {0, capacity, -1, {}, {}, {}, span, region::region_blocks_for(4096)}; }
std::uint64_t region_word(std::uint64_t tag, std::uint64_t asked) { return (tag << 32) | asked; }

TEST(CurrentRegion, TheFirstTakerInstallsAndLaterTakersGetConsecutiveSlots) {
  const region::SlotClass slots64 = class_of(64, 1);
  const std::uint64_t total = region::region_shape(slots64).slots;
  EXPECT_EQ(total, region::kRegionSlots);
  std::uint64_t word = 0;
  const region::RegionTake first = region::take_from_region(&word, slots64, 32);
  EXPECT_TRUE(first.installs);
  EXPECT_EQ(first.slots.count, 0);
  EXPECT_FALSE(region::take_from_region(&word, slots64, 32).installs) << "one installer per state";
  word = region_word(1000 + 1, 32);  // what the installer publishes: region at block 1000, 32 slots taken
  region::RegionTake next = region::take_from_region(&word, slots64, 32);
  EXPECT_FALSE(next.installs);
  ASSERT_EQ(next.slots.count, 32);
  const region::Reservation piece = next.slots.take_block(slots64);
  EXPECT_EQ(piece.block, 1000u);
  EXPECT_EQ(piece.slots, region::low_bits(32) << 32) << "slots 32..63 of the region's first block";
  EXPECT_EQ(next.slots.count, 0);
  EXPECT_EQ(region::unhanded_region_slots(slots64, word), total - 64);
}

TEST(CurrentRegion, TheTakerThatUsesItUpGetsTheRestAndInstallsTheNext) {
  const region::SlotClass slots4 = class_of(4, 2);  // spans of two blocks, four slots each
  const region::RegionShape shape = region::region_shape(slots4);
  EXPECT_LE(shape.blocks, region::kMaxRegionBlocks);
  EXPECT_EQ(shape.blocks, 2 * shape.spans);
  std::uint64_t word = region_word(7 + 1, shape.slots - 6);
  region::RegionTake last = region::take_from_region(&word, slots4, 32);
  EXPECT_TRUE(last.installs);
  ASSERT_EQ(last.slots.count, 6);
  // Slots shape.slots - 6 .. - 1: two in the second-to-last span, four in the last.
  const region::Reservation a = last.slots.take_block(slots4);
  const region::Reservation b = last.slots.take_block(slots4);
  EXPECT_EQ(a.block, 7 + 2 * (shape.spans - 2));
  EXPECT_EQ(a.slots, 0xcu);
  EXPECT_EQ(b.block, 7 + 2 * (shape.spans - 1));
  EXPECT_EQ(b.slots, 0xfu);
  const region::RegionTake after = region::take_from_region(&word, slots4, 1);
  EXPECT_FALSE(after.installs);
  EXPECT_EQ(after.slots.count, 0) << "a used-up region gives nothing while the next is installed";
  EXPECT_EQ(region::unhanded_region_slots(slots4, word), 0u);
}

TEST(CurrentRegion, ACoolingDownClassTriesAgainAfterEnoughRequests) {
  const region::SlotClass one = class_of(1, 1);
  std::uint64_t word = region_word(region::kCooldownTag, region::kCooldownSlots - 40);
  EXPECT_FALSE(region::take_from_region(&word, one, 32).installs);
  const region::RegionTake crossing = region::take_from_region(&word, one, 32);
  EXPECT_TRUE(crossing.installs);
  EXPECT_EQ(crossing.slots.count, 0);
  EXPECT_FALSE(region::take_from_region(&word, one, 32).installs);
  EXPECT_EQ(region::unhanded_region_slots(one, word), 0u);
}

TEST(CurrentRegion, AThreadTheCoreRefusedTakesASlotOfAnotherShardsRegion) {
  soaheap::HeapOptions options;
  options.objects = (std::uint64_t{1} << 18) * 64;  // 2^18 blocks of Small
  options.backend = soaheap::Backend::host;
  TestHeap heap(options);
  const auto view = region::internals(heap.view());
  const int k = Untyped::kClassCount - 1;
  const region::SlotClass one = view.untyped_class(k);
  ASSERT_TRUE(region::takes_regions(view, one));
  std::uint64_t* const words = region::Untyped<std::remove_const_t<decltype(view)>>::region_words(view, k);
  // Shard 5 gets a region (one slot handed to its installer); the others cooled down (they found
  // no room for one), as in a heap that the core has no free block left in.
  const region::RegionSlots installed = region::install_region(view, one, words + 5, 1, 7);
  for (std::uint64_t shard = 0; shard < region::kRegionShards; ++shard)
    if (shard != 5) words[shard] = std::uint64_t{region::kCooldownTag} << 32;
  ASSERT_EQ(installed.count, 1);
  const std::uint64_t first = installed.region;
  const region::Reservation again = region::look_again_at_regions(view, one, words, 11, {0, 0, soaheap::HeapErrorKind::none});
  ASSERT_NE(again.slots, 0u);
  EXPECT_GE(again.block, first) << "the slot comes from shard 5's region, not from a region installed for it";
  EXPECT_LT(again.block, first + region::region_shape(one).blocks);
  EXPECT_EQ(region::unhanded_region_slots(one, words[5]), region::region_shape(one).slots - 2);
  view.release_slots(first, 1);
  view.release_slots(again.block, again.slots);
  heap.release_free_memory();
  heap.validate();
  EXPECT_EQ(heap.stats().free_blocks, heap.block_count());
}
}  // namespace soaheap_test
