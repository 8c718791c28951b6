// Migration between in-process ranks sharing one GPU (cuda backend; skips without a GPU).
#include "tests/common/migrate_suite.inc"

namespace soaheap_test::migration {
INSTANTIATE_TEST_SUITE_P(Cuda, MigrateTest, ::testing::Values(soaheap::Backend::cuda), soaheap_test::backend_name);
}  // namespace soaheap_test::migration
