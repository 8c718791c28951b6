// The untyped-memory suite on the host backend in the checked mode (frees cross-checked against the
// size classes' allocated bitmaps).
#define SOAHEAP_CHECKED 1
#include "tests/common/untyped_suite.inc"

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(HostChecked, UntypedTest, ::testing::Values(soaheap::Backend::host),
                         soaheap_test::backend_name);
}  // namespace soaheap_test
