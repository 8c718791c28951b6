// Ordered compaction on the host backend.
#include "tests/common/ordered_defrag_suite.inc"

namespace soaheap_test {

INSTANTIATE_TEST_SUITE_P(Host, OrderedDefragTest, ::testing::Values(soaheap::Backend::host), backend_name);

}  // namespace soaheap_test

namespace soaheap_test {

// The radix sort runs on 32-bit words only where nothing it sorts can be cut: keys of at most 32
// significant bits and source positions (block * 64 + slot) below 2^32.
TEST(OrderedSortWords, ThirtyTwoBitWordsOnlyWhereKeysAndPositionsFit) {
  EXPECT_TRUE(soaheap::detail::sort_words_fit(1, 1));
  EXPECT_TRUE(soaheap::detail::sort_words_fit(32, std::uint64_t{1} << 26));
  EXPECT_FALSE(soaheap::detail::sort_words_fit(33, 1024));
  EXPECT_FALSE(soaheap::detail::sort_words_fit(64, 1024));
  EXPECT_FALSE(soaheap::detail::sort_words_fit(27, (std::uint64_t{1} << 26) + 1));
}

}  // namespace soaheap_test
