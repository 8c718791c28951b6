// A CUDA application reads a TOML defragmentation configuration: this file is compiled by nvcc when
// the CUDA backend is built (by the C++ compiler otherwise), includes only the plain configuration
// header, and loads a .toml file through the compiled soaheap::config library, then lets a policy
// built from it defragment a heap on each backend (cuda skips without a GPU).

#include "tests/common/backend_fixture.cuh"

#include <soaheap/config/defrag_config.hpp>
#include <soaheap/defrag/policy.hpp>
#include <soaheap/soaheap.cuh>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using soaheap_test::BackendTest;

class Fish : public soaheap::Object<Fish> {
 public:
  using FieldTypes = soaheap::fields<std::uint32_t>;
  static constexpr const char* kName = "Fish";
  soaheap::Field<Fish, 0> age;
  SOAHEAP_HD explicit Fish(std::uint64_t index) { age = static_cast<std::uint32_t>(index); }
};

class Shark : public soaheap::Object<Shark> {
 public:
  using FieldTypes = soaheap::fields<std::uint32_t, double, double>;
  static constexpr const char* kName = "Shark";
  soaheap::Field<Shark, 0> age;
  soaheap::Field<Shark, 1> x;
  soaheap::Field<Shark, 2> y;
  SOAHEAP_HD explicit Shark(std::uint64_t index) {
    age = static_cast<std::uint32_t>(index);
    x = 0.0;
    y = 0.0;
  }
};

using OceanHeap = soaheap::Heap<Fish, Shark>;

std::string fixture(const char* name) { return std::string(SOAHEAP_TEST_DATA_DIR) + "/" + name; }

TEST(ConfigInCudaSources, TomlStringParses) {
  const soaheap::DefragConfig config = soaheap::parse_defrag_config_toml(
      "[defrag]\npolicy = \"every\"\nevery = 3\n[defrag.classes.Fish]\nfactor = 2\n", {{"Fish", 64}, {"Shark", 12}});
  EXPECT_EQ(config.policy, soaheap::DefragPolicyKind::every);
  EXPECT_EQ(config.every, 3);
  EXPECT_EQ(config.factor_for("Fish"), 2);
  EXPECT_EQ(config.factor_for("Shark"), 1);
}

TEST(ConfigInCudaSources, TomlErrorsNameKeyAndValue) {
  try {
    soaheap::parse_defrag_config_toml("[defrag]\nfactor = 0\n", {{"Fish", 64}});
    FAIL() << "factor 0 was accepted";
  } catch (const soaheap::config_error& error) {
    EXPECT_NE(std::string(error.what()).find("defrag.factor = 0"), std::string::npos) << error.what();
    EXPECT_EQ(error.key(), "defrag.factor");
  }
}

TEST_P(BackendTest, TomlFileConfiguresThePolicyOfAHeap) {
  OceanHeap heap(options_for_objects(4096));
  const soaheap::DefragConfig config =
      soaheap::load_defrag_config(fixture("defrag_valid.toml"), soaheap::detail::class_infos(heap), [](const char*) {
        return static_cast<const char*>(nullptr);
      });
  EXPECT_EQ(config.policy, soaheap::DefragPolicyKind::mass);
  EXPECT_EQ(config.factor_for("Fish"), 3);
  EXPECT_EQ(config.factor_for("Shark"), 2);
  EXPECT_EQ(config.retained_candidates_for("Fish"), 8);
  EXPECT_EQ(config.min_compactions_for("Shark"), 2);
  EXPECT_TRUE(config.mass_threshold.is_percent);
  EXPECT_EQ(config.locality_window_for("Fish"), 4096);  // windows wider than this heap: the whole class
  EXPECT_EQ(config.locality_window_for("Shark"), 0);

  heap.parallel_new<Fish>(300);
  heap.parallel_new<Shark>(50);
  soaheap::DefragPolicy policy(config);
  EXPECT_NO_THROW(policy.maybe_defrag(heap, 1));
  // The policy applied the per-class factors of the file to the heap.
  EXPECT_EQ(heap.defrag_factor(OceanHeap::class_id<Fish>), 3);
  EXPECT_EQ(heap.defrag_factor(OceanHeap::class_id<Shark>), 2);
  heap.validate();
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest, ::testing::Values(soaheap::Backend::host, soaheap::Backend::cuda),
                         soaheap_test::backend_name);

}  // namespace
