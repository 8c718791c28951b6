// The DynaSOAr compatibility suite on the host backend, compiled by the plain C++ compiler.
#include "tests/common/compat/dynasoar_suite.inc"

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(Host, BackendTest, ::testing::Values(soaheap::Backend::host), soaheap_test::backend_name);
}  // namespace soaheap_test
