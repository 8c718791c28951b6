// The churn stress suite on the cuda backend (skips without a GPU): destroy + new in one kernel,
// the exact live set checked after every kernel. Run it under compute-sanitizer racecheck and
// synccheck too (tools/gpu/suites.sh).
#include "tests/common/churn_suite.inc"

namespace soaheap_test {
INSTANTIATE_TEST_SUITE_P(Cuda, BackendTest, ::testing::Values(soaheap::Backend::cuda), soaheap_test::backend_name);
}  // namespace soaheap_test
