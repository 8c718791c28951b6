// Ordered compaction on the host backend.
#include "tests/common/ordered_defrag_suite.inc"

namespace soaheap_test {

INSTANTIATE_TEST_SUITE_P(Host, OrderedDefragTest, ::testing::Values(soaheap::Backend::host), backend_name);

}  // namespace soaheap_test
