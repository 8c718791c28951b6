// The DynaSOAr compatibility suite on the cuda backend (skips without a GPU).
#include "tests/common/compat/dynasoar_suite.inc"

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(Cuda, BackendTest, ::testing::Values(soaheap::Backend::cuda), soaheap_test::backend_name);
}  // namespace soaheap_test
