// Ordered compaction on the cuda backend (skips without a GPU).
#include "tests/common/ordered_defrag_suite.inc"

namespace soaheap_test {

INSTANTIATE_TEST_SUITE_P(Cuda, OrderedDefragTest, ::testing::Values(soaheap::Backend::cuda), backend_name);

}  // namespace soaheap_test
