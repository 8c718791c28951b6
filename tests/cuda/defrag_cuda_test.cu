// The defragmentation suite on the cuda backend (both compaction and both rewrite strategies; skips without a GPU).
#include "tests/common/defrag_suite.inc"

namespace soaheap_test {

INSTANTIATE_TEST_SUITE_P(Cuda, DefragTest, defrag_parameters(soaheap::Backend::cuda), defrag_parameter_name);

}  // namespace soaheap_test
