// Migration between in-process ranks on the host backend.
#include "tests/common/migrate_suite.inc"

namespace soaheap_test::migration {
INSTANTIATE_TEST_SUITE_P(Host, MigrateTest, ::testing::Values(soaheap::Backend::host), soaheap_test::backend_name);
}  // namespace soaheap_test::migration
