// The untyped-memory suite on the cuda backend (skips without a GPU), plus block-wide DeviceList appends.
#include "tests/common/untyped_suite.inc"

#include <cooperative_groups.h>

namespace soaheap_test {

/// Every thread of a CUDA thread block appends tid % 3 + 1 values through one block-wide reservation.
__global__ void append_per_block(List::View list, std::uint64_t threads, std::uint64_t* failures) {
  namespace cg = cooperative_groups;
  const std::uint64_t tid = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uint64_t count = tid < threads ? tid % 3 + 1 : 0;  // every thread calls it (count 0 beyond the end)
  const std::uint64_t first = list.append(cg::this_thread_block(), count);
  if (count == 0) return;
  if (first == List::View::kNoIndex) {
    atomicAdd(reinterpret_cast<unsigned long long*>(failures), 1ull);
    return;
  }
  for (std::uint64_t j = 0; j < count; ++j) list[first + j] = (tid << 8) | j;
}

TEST_P(UntypedTest, DeviceListBlockWideAppendHoldsEachValueOnce) {
  TestHeap heap(options_for_blocks(16384));
  List list(heap);
  const std::uint64_t threads = 100000;
  TestBuffer<std::uint64_t> failures(backend(), 1);
  append_per_block<<<(threads + 255) / 256, 256>>>(list.view(), threads, failures.data());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  heap.synchronize();
  EXPECT_EQ(failures.to_host()[0], 0u);
  std::vector<std::uint64_t> expected;
  for (std::uint64_t t = 0; t < threads; ++t)
    for (std::uint64_t j = 0; j <= t % 3; ++j) expected.push_back((t << 8) | j);
  std::vector<std::uint64_t> values = list.to_host();
  std::sort(values.begin(), values.end());
  EXPECT_EQ(values, expected);
  heap.validate();
}

INSTANTIATE_TEST_SUITE_P(Cuda, UntypedTest, ::testing::Values(soaheap::Backend::cuda), soaheap_test::backend_name);
}  // namespace soaheap_test
