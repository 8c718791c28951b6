// The heap suite on the host backend (real threads; runs everywhere, also under TSan and ASan).
#include "tests/common/heap_suite.inc"
#define GROWTH_BACKEND_NAME Host
#define GROWTH_BACKEND soaheap::Backend::host
#include "tests/common/growth_suite.inc"

#include <random>

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(Host, BackendTest, ::testing::Values(soaheap::Backend::host), soaheap_test::backend_name);
}  // namespace soaheap_test

namespace soaheap_test {
// Programs that cannot pass HeapOptions (DynaSOAr's through the shim) choose the host backend's
// worker count with SOAHEAP_HOST_THREADS; explicit options win, and a bad value is refused by name.
TEST(HostThreads, EnvironmentVariableSetsTheDefaultWorkerCount) {
  soaheap::HeapOptions options;
  options.objects = 64;
  ASSERT_EQ(setenv("SOAHEAP_HOST_THREADS", "5", 1), 0);
  {
    TestHeap heap(options);
    EXPECT_EQ(heap.host_threads(), 5u);
  }
  options.host_threads = 3;
  {
    TestHeap heap(options);
    EXPECT_EQ(heap.host_threads(), 3u);
  }
  options.host_threads = 0;
  for (const char* bad : {"0", "-2", "many", "5x", "100000"}) {
    ASSERT_EQ(setenv("SOAHEAP_HOST_THREADS", bad, 1), 0);
    try {
      TestHeap heap(options);
      ADD_FAILURE() << "expected invalid_argument for " << bad;
    } catch (const soaheap::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(std::string("SOAHEAP_HOST_THREADS=\"") + bad + "\""),
                std::string::npos)
          << error.what();
    }
  }
  ASSERT_EQ(unsetenv("SOAHEAP_HOST_THREADS"), 0);
  TestHeap heap(options);
  EXPECT_GE(heap.host_threads(), 1u);
}
}  // namespace soaheap_test

namespace soaheap_test {
// A thread-per-item launch over a list shorter than one 256-thread block per SM spreads its warps
// over every SM (soaheap::detail::spread_block_threads); longer lists keep 256-thread blocks.
TEST(LaunchShape, ShortListsSpreadOverEveryMultiprocessor) {
  using soaheap::detail::spread_block_threads;
  constexpr std::uint64_t kH100 = 132;
  // 20,000 items: 79 blocks of 256 (8 warps on the busiest SM) or 625 of 32 (5 warps).
  EXPECT_EQ(spread_block_threads(20000, kH100), 32u);
  // 16,384 items: 64 blocks of 256 (8 warps) or 128 of 128 (4 warps; 64 and 32 tie at 4).
  EXPECT_EQ(spread_block_threads(16384, kH100), 128u);
  // One block of 256 per SM or more: unchanged, also where smaller blocks would balance better.
  EXPECT_EQ(spread_block_threads(kH100 * 256, kH100), 256u);
  EXPECT_EQ(spread_block_threads(100000, kH100), 256u);
  EXPECT_EQ(spread_block_threads(std::uint64_t{1} << 40, kH100), 256u);
  // Two warps: on one SM in a block of 256, on two SMs in blocks of 32.
  EXPECT_EQ(spread_block_threads(64, kH100), 32u);
  // One warp: one SM whatever the block, so the largest block wins the tie.
  EXPECT_EQ(spread_block_threads(20, kH100), 256u);
  EXPECT_EQ(spread_block_threads(0, kH100), 256u);
  EXPECT_EQ(spread_block_threads(5000, 0), 256u);
  // Never more warps on the busiest SM than with 256-thread blocks, for every short list.
  for (std::uint64_t items = 1; items < kH100 * 256; items += 97) {
    const std::uint64_t threads = spread_block_threads(items, kH100);
    ASSERT_TRUE(threads == 32 || threads == 64 || threads == 128 || threads == 256) << items;
    const auto busiest = [&](std::uint64_t block) {
      const std::uint64_t blocks = (items + block - 1) / block;
      return std::min((blocks + kH100 - 1) / kH100 * (block / 32), (items + 31) / 32);
    };
    EXPECT_LE(busiest(threads), busiest(256)) << items;
  }
}
}  // namespace soaheap_test

namespace soaheap_test {
// SOAHEAP_ROW_KERNEL fixes the row kernel of long lists (soaheap::detail::RowKernelChoice);
// anything but auto, rows and pipelined (the empty string too) is refused by name.
TEST(LaunchShape, RowKernelChoiceFromTheEnvironment) {
  using soaheap::detail::RowKernel;
  using soaheap::detail::parse_row_kernel;
  EXPECT_EQ(parse_row_kernel(nullptr), RowKernel::measured);  // not set
  EXPECT_EQ(parse_row_kernel("auto"), RowKernel::measured);
  EXPECT_EQ(parse_row_kernel("rows"), RowKernel::rows);
  EXPECT_EQ(parse_row_kernel("pipelined"), RowKernel::pipelined);
  for (const char* bad : {"", "Rows", "16", "pipeline", " rows"}) {
    try {
      parse_row_kernel(bad);
      ADD_FAILURE() << "expected invalid_argument for '" << bad << "'";
    } catch (const soaheap::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find(std::string("\"") + bad + "\""), std::string::npos) << error.what();
    }
  }
}
}  // namespace soaheap_test

namespace soaheap_test {
// A warp's reservation of several slots takes free slots only, as many as it wants (or all there
// are), and starts at a seed-dependent slot: warps reserving in one block at once then mostly take
// different slots instead of all going for the lowest free ones and retrying.
TEST(ChooseSlots, SeveralSlotsAreFreeOnesFromASeedDependentStart) {
  std::mt19937_64 random(7);
  for (int round = 0; round < 2000; ++round) {
    const std::uint64_t free_slots = random() & random();  // about a quarter of the slots free
    const int wanted = 2 + static_cast<int>(random() % 31);
    const auto seed = static_cast<std::uint32_t>(random());
    const std::uint64_t chosen = soaheap::detail::choose_slots(free_slots, wanted, seed);
    EXPECT_EQ(chosen & ~free_slots, 0u) << "free " << free_slots << " seed " << seed;
    EXPECT_EQ(__builtin_popcountll(chosen), std::min(wanted, __builtin_popcountll(free_slots)))
        << "free " << free_slots << " wanted " << wanted;
  }
  // In an empty block, the chosen slots are consecutive from slot seed % 64, wrapping around.
  EXPECT_EQ(soaheap::detail::choose_slots(~0ull, 4, 10), 0xfull << 10);
  EXPECT_EQ(soaheap::detail::choose_slots(~0ull, 4, 64 + 62), 0x3ull << 62 | 0x3ull);
  EXPECT_EQ(soaheap::detail::choose_slots(~0ull, 32, 0), 0xffffffffull);
  // Past the start, the next free ones; then the lowest ones below it.
  EXPECT_EQ(soaheap::detail::choose_slots(0b1010'0001ull, 2, 6), 0b1000'0001ull);
}
}  // namespace soaheap_test
