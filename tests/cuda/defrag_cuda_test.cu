// The defragmentation suite on the cuda backend (both rewrite strategies; skips without a GPU).
#include "tests/common/defrag_suite.inc"

namespace soaheap_test {

INSTANTIATE_TEST_SUITE_P(Cuda, DefragTest,
                         ::testing::Combine(::testing::Values(soaheap::Backend::cuda),
                                            ::testing::Values(soaheap::RewriteStrategy::forwarding_pointers,
                                                              soaheap::RewriteStrategy::records)),
                         defrag_parameter_name);

}  // namespace soaheap_test
