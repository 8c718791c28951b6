// The heap suite on the host backend (real threads; runs everywhere, also under TSan and ASan).
#include "tests/common/heap_suite.inc"

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
