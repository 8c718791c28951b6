// The heap suite on the cuda backend (skips without a GPU), plus GPU-only sizes.
#include "tests/common/heap_suite.inc"
#define GROWTH_BACKEND_NAME Cuda
#define GROWTH_BACKEND soaheap::Backend::cuda
#include "tests/common/growth_suite.inc"

#include <cstdio>
#include <set>
#include <vector>

namespace soaheap_test {

TEST_P(BackendTest, EightGibibyteHeap) {
  soaheap::HeapOptions options;
  options.bytes = std::uint64_t{8} << 30;
  options.backend = backend();
  TestHeap heap(options);
  EXPECT_GE(heap.heap_bytes(), std::uint64_t{8} << 30 >> 1);
  const std::uint64_t count = std::uint64_t{1} << 24;  // 16 M objects spread over the heap
  TestBuffer<Small*> objects(backend(), count);
  heap.launch(count, AllocateSmall{heap.view(), objects.data(), 0});
  heap.validate(soaheap::Validation::structure);
  EXPECT_EQ(heap.count<Small>(), count);
  heap.launch(count, DestroySome{heap.view(), objects.data(), 1});
  heap.validate(soaheap::Validation::structure);
  EXPECT_EQ(heap.stats().free_blocks, heap.block_count());
}

/// Thread t allocates (7919·t mod 61) + 1 objects in a loop: after the first iteration the lanes
/// that still allocate are a diverged part of their warp, one object each per iteration.
struct AllocateRagged {
  View heap;
  Small** out;
  SOAHEAP_HD static int count(std::uint64_t tid) { return static_cast<int>((tid * 7919) % 61) + 1; }
  SOAHEAP_HD void operator()(std::uint64_t tid) const {
    for (int i = 0; i < count(tid); ++i) out[tid * 61 + i] = new (heap) Small(tid * 61 + i, tid);
  }
};

// HeapOptions::pack_allocations: diverged lanes that find only blocks that filled up under them
// look again before starting a block. Without it this loop left the blocks of an 8x heap about 55 %
// full on an H100; packed they were 98-99 % full (docs/decisions/004-pack-allocations-opt-in.md).
TEST_P(BackendTest, PackedAllocationsFillTheBlocksOfARaggedAllocationLoop) {
  const std::uint64_t threads = 32768;
  std::uint64_t total = 0;
  for (std::uint64_t t = 0; t < threads; ++t) total += static_cast<std::uint64_t>(AllocateRagged::count(t));
  for (const bool packed : {false, true}) {
    SCOPED_TRACE(packed ? "packed" : "default");
    soaheap::HeapOptions options;
    options.objects = 8 * total;
    options.backend = backend();
    options.pack_allocations = packed;
    TestHeap heap(options);
    TestBuffer<Small*> objects(backend(), threads * 61);
    heap.launch(threads, AllocateRagged{heap.view(), objects.data()});
    heap.throw_recorded_error();
    heap.validate(soaheap::Validation::structure);
    ASSERT_EQ(heap.count<Small>(), total);
    const soaheap::ClassStats small = heap.stats().of("Small");  // a copy: stats() is a temporary
    const double fill = static_cast<double>(small.used_slots) /
                        static_cast<double>(small.allocated_blocks * static_cast<std::uint64_t>(small.capacity));
    std::printf("[ info     ] %s: %llu objects in %llu blocks of %d slots, %.3f full\n", packed ? "packed" : "default",
                static_cast<unsigned long long>(total), static_cast<unsigned long long>(small.allocated_blocks),
                small.capacity, fill);
    if (packed) EXPECT_GE(fill, 0.85);
    // Every pointer handed out is a distinct live object with its own id.
    const std::vector<Small*> pointers = objects.to_host();
    std::set<Small*> distinct;
    for (std::uint64_t t = 0; t < threads; ++t)
      for (int i = 0; i < AllocateRagged::count(t); ++i) distinct.insert(pointers[t * 61 + i]);
    EXPECT_EQ(distinct.size(), total);
    EXPECT_EQ(distinct.count(nullptr), 0u);
  }
}

}  // namespace soaheap_test

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(Cuda, BackendTest, ::testing::Values(soaheap::Backend::cuda), soaheap_test::backend_name);
}  // namespace soaheap_test
