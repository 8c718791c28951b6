// The heap suite on the cuda backend (skips without a GPU), plus GPU-only sizes.
#include "tests/common/heap_suite.inc"

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

}  // namespace soaheap_test

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(Cuda, BackendTest, ::testing::Values(soaheap::Backend::cuda), soaheap_test::backend_name);
}  // namespace soaheap_test
