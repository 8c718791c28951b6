// The churn stress suite on the host backend (real threads; runs everywhere, also under TSan and ASan).
#include "tests/common/churn_suite.inc"

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(Host, BackendTest, ::testing::Values(soaheap::Backend::host), soaheap_test::backend_name);
}  // namespace soaheap_test
