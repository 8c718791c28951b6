// Tests for <soaheap/config/defrag_config.hpp>: file formats, environment
// overrides, validation against class capacities, policy specs, and the
// wording of every config_error (key, bad value and origin must be named).

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <soaheap/config/defrag_config.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using soaheap::ClassInfo;
using soaheap::config_error;
using soaheap::DefragConfig;
using soaheap::DefragPolicyKind;

// Capacities as a Wa-Tor-like heap might report them; "Grid" holds one object
// per block and therefore cannot be defragmented.
const std::vector<ClassInfo> heap_classes{{"Fish", 48}, {"Shark", 32}, {"Cell", 64}, {"Grid", 1}};

std::string data_path(const std::string& file_name) {
#ifdef SOAHEAP_TEST_DATA_DIR
  const std::filesystem::path directory = SOAHEAP_TEST_DATA_DIR;
#else
  // Works both for CMake (absolute __FILE__) and for a manual build from the
  // repository root (relative __FILE__).
  const std::filesystem::path directory = std::filesystem::path(__FILE__).parent_path() / "data";
#endif
  return (directory / file_name).string();
}

/// Variables handed to the code under test through its getenv parameter, so
/// that tests never modify the process environment.
class fake_environment {
 public:
  fake_environment(std::initializer_list<std::pair<const std::string, std::string>> variables)
      : variables_(variables) {}

  std::function<const char*(const char*)> getenv() const {
    return [this](const char* name) -> const char* {
      const auto found = variables_.find(name);
      return found == variables_.end() ? nullptr : found->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> variables_;
};

const fake_environment empty_environment{};

/// Succeeds when @p action throws config_error whose message contains every
/// one of @p fragments.
::testing::AssertionResult throws_config_error(const std::function<void()>& action,
                                               std::initializer_list<std::string_view> fragments) {
  try {
    action();
  } catch (const config_error& error) {
    const std::string message = error.what();
    for (const std::string_view fragment : fragments) {
      if (message.find(fragment) == std::string::npos) {
        return ::testing::AssertionFailure() << "message \"" << message << "\" does not contain \"" << fragment << "\"";
      }
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& error) {
    return ::testing::AssertionFailure() << "threw another exception: " << error.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

DefragConfig from_toml(std::string_view text) { return soaheap::parse_defrag_config_toml(text, heap_classes); }
DefragConfig from_json(std::string_view text) { return soaheap::parse_defrag_config_json(text, heap_classes); }

void expect_same(const DefragConfig& actual, const DefragConfig& expected) {
  EXPECT_EQ(actual.policy, expected.policy);
  EXPECT_EQ(actual.factor, expected.factor);
  EXPECT_EQ(actual.retained_candidates, expected.retained_candidates);
  EXPECT_EQ(actual.min_compactions, expected.min_compactions);
  EXPECT_EQ(actual.every, expected.every);
  EXPECT_DOUBLE_EQ(actual.mass_threshold.value, expected.mass_threshold.value);
  EXPECT_EQ(actual.mass_threshold.is_percent, expected.mass_threshold.is_percent);
  EXPECT_EQ(actual.locality_window, expected.locality_window);
  EXPECT_EQ(actual.release_memory, expected.release_memory);
  EXPECT_EQ(actual.map_fresh_blocks, expected.map_fresh_blocks);
  ASSERT_EQ(actual.classes.size(), expected.classes.size());
  for (const auto& [name, settings] : expected.classes) {
    const auto found = actual.classes.find(name);
    ASSERT_NE(found, actual.classes.end()) << name;
    EXPECT_EQ(found->second.factor, settings.factor) << name;
    EXPECT_EQ(found->second.retained_candidates, settings.retained_candidates) << name;
    EXPECT_EQ(found->second.min_compactions, settings.min_compactions) << name;
    EXPECT_EQ(found->second.locality_window, settings.locality_window) << name;
  }
}

DefragConfig expected_valid_fixture() {
  DefragConfig config;
  config.policy = DefragPolicyKind::mass;
  config.factor = 2;
  config.retained_candidates = 16;
  config.min_compactions = 4;
  config.every = 50;
  config.mass_threshold = {2.5, true};
  config.locality_window = 4096;
  config.classes["Fish"].factor = 3;
  config.classes["Fish"].retained_candidates = 8;
  config.classes["Shark"].min_compactions = 2;
  config.classes["Shark"].locality_window = 0;
  return config;
}

// ---------------------------------------------------------------------------
// Valid input

TEST(DefragConfigFile, TomlFixtureLoadsEveryKey) {
  const DefragConfig config = soaheap::load_defrag_config_file(data_path("defrag_valid.toml"), heap_classes);
  expect_same(config, expected_valid_fixture());
  EXPECT_NO_THROW(soaheap::validate(config, heap_classes));
}

TEST(DefragConfigFile, JsonFixtureLoadsSameConfigAsToml) {
  const DefragConfig config = soaheap::load_defrag_config_file(data_path("defrag_valid.json"), heap_classes);
  expect_same(config, expected_valid_fixture());
}

TEST(DefragConfigFile, ExtensionIsCaseInsensitiveAndSelectsTheFormat) {
  // A JSON document in a file named .TOML must be read as TOML and fail.
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "soaheap_defrag_config_test.TOML";
  {
    std::ofstream file(path);
    file << "[defrag]\nfactor = 5\n";
  }
  EXPECT_EQ(soaheap::load_defrag_config_file(path.string(), heap_classes).factor, 5);
  std::filesystem::remove(path);
}

TEST(DefragConfigFile, EveryFixtureKeepsAbsoluteThreshold) {
  const DefragConfig config = soaheap::load_defrag_config_file(data_path("defrag_every.toml"), heap_classes);
  EXPECT_EQ(config.policy, DefragPolicyKind::every);
  EXPECT_EQ(config.every, 50);
  EXPECT_DOUBLE_EQ(config.mass_threshold.value, 5000);
  EXPECT_FALSE(config.mass_threshold.is_percent);
}

TEST(DefragConfigFile, EmptyDocumentsGiveDefaults) {
  for (const DefragConfig& config : {from_toml(""), from_toml("# only a comment\n"), from_json("{}"),
                                     from_toml("[defrag]\n"), from_json(R"({"defrag": {}})")}) {
    expect_same(config, DefragConfig{});
  }
}

TEST(DefragConfigFile, MassThresholdForms) {
  const auto threshold_of = [](std::string_view toml) { return from_toml(toml).mass_threshold; };
  EXPECT_DOUBLE_EQ(threshold_of("defrag.mass_threshold = 5000").value, 5000);
  EXPECT_FALSE(threshold_of("defrag.mass_threshold = 5000").is_percent);
  EXPECT_DOUBLE_EQ(threshold_of("defrag.mass_threshold = \"5000\"").value, 5000);
  EXPECT_DOUBLE_EQ(threshold_of("defrag.mass_threshold = \"100%\"").value, 100);
  EXPECT_TRUE(threshold_of("defrag.mass_threshold = \"0.5%\"").is_percent);
  EXPECT_DOUBLE_EQ(from_json(R"({"defrag": {"mass_threshold": 7}})").mass_threshold.value, 7);
}

TEST(DefragConfigFile, ClassNamesThatAreNotBareKeys) {
  const std::vector<ClassInfo> classes{{"sim::Fish", 48}};
  const DefragConfig config =
      soaheap::parse_defrag_config_toml("[defrag.classes.\"sim::Fish\"]\nfactor = 4\n", classes);
  EXPECT_EQ(config.factor_for("sim::Fish"), 4);
  EXPECT_TRUE(throws_config_error(
      [&] { soaheap::parse_defrag_config_toml("[defrag.classes.\"sim::Fish\"]\nfactor = 48\n", classes); },
      {"defrag.classes.\"sim::Fish\".factor = 48", "at most 47"}));
}

TEST(MassThreshold, CandidateCountForHeap) {
  EXPECT_EQ((soaheap::MassThreshold{5000, false}.candidate_count(1'000'000)), 5000);
  EXPECT_EQ((soaheap::MassThreshold{2.5, true}.candidate_count(1000)), 25);
  EXPECT_EQ((soaheap::MassThreshold{2.5, true}.candidate_count(10)), 1);  // rounds up, never 0
  EXPECT_FALSE(soaheap::MassThreshold{}.is_set());
}

// ---------------------------------------------------------------------------
// Per-class fallback

TEST(DefragConfigClasses, OverridesFallBackToGlobalValues) {
  const DefragConfig config = expected_valid_fixture();
  EXPECT_EQ(config.factor_for("Fish"), 3);
  EXPECT_EQ(config.retained_candidates_for("Fish"), 8);
  EXPECT_EQ(config.min_compactions_for("Fish"), 4);  // not overridden

  EXPECT_EQ(config.factor_for("Shark"), 2);
  EXPECT_EQ(config.retained_candidates_for("Shark"), 16);
  EXPECT_EQ(config.min_compactions_for("Shark"), 2);

  EXPECT_EQ(config.factor_for("Cell"), 2);  // no entry at all
  EXPECT_EQ(config.retained_candidates_for("Cell"), 16);
  EXPECT_EQ(config.min_compactions_for("Cell"), 4);
}

TEST(DefragConfigClasses, ClassOwnFactorReplacesTooLargeGlobalFactor) {
  // Shark (capacity 32) cannot use n = 40, but it does not have to.
  const std::vector<ClassInfo> classes{{"Fish", 48}, {"Shark", 32}};
  const DefragConfig config =
      soaheap::parse_defrag_config_toml("[defrag]\nfactor = 40\n[defrag.classes.Shark]\nfactor = 8\n", classes);
  EXPECT_NO_THROW(soaheap::validate(config, classes));
  EXPECT_EQ(config.factor_for("Fish"), 40);
  EXPECT_EQ(config.factor_for("Shark"), 8);
}

// ---------------------------------------------------------------------------
// Environment

TEST(DefragConfigEnvironment, OverridesBeatTheFile) {
  const fake_environment environment{{"SOAHEAP_DEFRAG_POLICY", "every"},
                                     {"SOAHEAP_DEFRAG_FACTOR", "5"},
                                     {"SOAHEAP_DEFRAG_RETAINED", "0"},
                                     {"SOAHEAP_DEFRAG_MIN_COMPACTIONS", "3"},
                                     {"SOAHEAP_DEFRAG_EVERY", "25"},
                                     {"SOAHEAP_DEFRAG_MASS_THRESHOLD", "1234"},
                                     {"SOAHEAP_DEFRAG_FACTOR_FISH", "7"},
                                     {"SOAHEAP_DEFRAG_RETAINED_SHARK", "4"},
                                     {"SOAHEAP_DEFRAG_MIN_COMPACTIONS_CELL", "9"},
                                     {"SOAHEAP_DEFRAG_LOCALITY_WINDOW", "256"},
                                     {"SOAHEAP_DEFRAG_LOCALITY_WINDOW_FISH", "64"}};
  const DefragConfig config =
      soaheap::load_defrag_config(data_path("defrag_valid.toml"), heap_classes, environment.getenv());

  EXPECT_EQ(config.policy, DefragPolicyKind::every);
  EXPECT_EQ(config.factor, 5);
  EXPECT_EQ(config.retained_candidates, 0);
  EXPECT_EQ(config.min_compactions, 3);
  EXPECT_EQ(config.every, 25);
  EXPECT_DOUBLE_EQ(config.mass_threshold.value, 1234);
  EXPECT_FALSE(config.mass_threshold.is_percent);
  EXPECT_EQ(config.factor_for("Fish"), 7);
  EXPECT_EQ(config.retained_candidates_for("Fish"), 8);  // from the file, untouched
  EXPECT_EQ(config.retained_candidates_for("Shark"), 4);
  EXPECT_EQ(config.min_compactions_for("Cell"), 9);
  EXPECT_EQ(config.factor_for("Cell"), 5);
  EXPECT_EQ(config.locality_window, 256);
  EXPECT_EQ(config.locality_window_for("Fish"), 64);
  EXPECT_EQ(config.locality_window_for("Shark"), 0);  // the file's own 0 beats the global value
  EXPECT_EQ(config.locality_window_for("Cell"), 256);
}

TEST(DefragConfigEnvironment, UnsetVariablesKeepTheFileValues) {
  const DefragConfig config =
      soaheap::load_defrag_config(data_path("defrag_valid.toml"), heap_classes, empty_environment.getenv());
  expect_same(config, expected_valid_fixture());
}

TEST(DefragConfigEnvironment, WithoutFileStartsFromDefaults) {
  const fake_environment environment{{"SOAHEAP_DEFRAG_MASS_THRESHOLD", "2.5%"}, {"SOAHEAP_DEFRAG_POLICY", "mass"}};
  const DefragConfig config = soaheap::load_defrag_config(std::nullopt, heap_classes, environment.getenv());
  EXPECT_EQ(config.policy, DefragPolicyKind::mass);
  EXPECT_DOUBLE_EQ(config.mass_threshold.value, 2.5);
  EXPECT_TRUE(config.mass_threshold.is_percent);
  EXPECT_EQ(config.factor, 1);
}

TEST(DefragConfigEnvironment, ClassVariableNamesAreUpperCaseWithUnderscores) {
  const std::vector<ClassInfo> classes{{"sim::Fish", 48}, {"Shark2", 32}};
  const fake_environment environment{{"SOAHEAP_DEFRAG_FACTOR_SIM__FISH", "6"}, {"SOAHEAP_DEFRAG_FACTOR_SHARK2", "3"}};
  DefragConfig config;
  soaheap::apply_defrag_env_overrides(config, classes, environment.getenv());
  EXPECT_EQ(config.factor_for("sim::Fish"), 6);
  EXPECT_EQ(config.factor_for("Shark2"), 3);
}

TEST(DefragConfigEnvironment, InvalidNumbersNameVariableAndValue) {
  const std::vector<std::string> integer_variables{"SOAHEAP_DEFRAG_FACTOR",
                                                   "SOAHEAP_DEFRAG_RETAINED",
                                                   "SOAHEAP_DEFRAG_MIN_COMPACTIONS",
                                                   "SOAHEAP_DEFRAG_EVERY",
                                                   "SOAHEAP_DEFRAG_LOCALITY_WINDOW",
                                                   "SOAHEAP_DEFRAG_FACTOR_FISH",
                                                   "SOAHEAP_DEFRAG_RETAINED_FISH",
                                                   "SOAHEAP_DEFRAG_MIN_COMPACTIONS_FISH",
                                                   "SOAHEAP_DEFRAG_LOCALITY_WINDOW_FISH"};
  for (const std::string& variable : integer_variables) {
    for (const std::string bad : {"3x", "", " 3", "+3", "2.0", "-1", "99999999999999999999"}) {
      SCOPED_TRACE(variable + "=" + bad);
      const fake_environment environment{{variable, bad}};
      DefragConfig config;
      EXPECT_TRUE(
          throws_config_error([&] { soaheap::apply_defrag_env_overrides(config, heap_classes, environment.getenv()); },
                              {"environment", variable, "\"" + bad + "\""}));
    }
  }
}

TEST(DefragConfigEnvironment, InvalidPolicyAndThreshold) {
  const auto apply = [](const fake_environment& environment) {
    DefragConfig config;
    soaheap::apply_defrag_env_overrides(config, heap_classes, environment.getenv());
  };
  EXPECT_TRUE(throws_config_error(
      [&] {
        apply({{"SOAHEAP_DEFRAG_POLICY", "sometimes"}});
      },
      {"SOAHEAP_DEFRAG_POLICY", "\"sometimes\"", "manual", "every", "mass"}));
  EXPECT_TRUE(throws_config_error([&] { apply({{"SOAHEAP_DEFRAG_POLICY", ""}}); }, {"SOAHEAP_DEFRAG_POLICY", "\"\""}));
  for (const std::string bad : {"", "%", "abc", "0", "-5", "0%", "150%", "-1%", "nan%", "2.5", "5e3", "2.5 %"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(throws_config_error(
        [&] {
          apply({{"SOAHEAP_DEFRAG_MASS_THRESHOLD", bad}});
        },
        {"SOAHEAP_DEFRAG_MASS_THRESHOLD", "\"" + bad + "\""}));
  }
}

TEST(DefragConfigEnvironment, FactorIsCheckedAgainstClassCapacities) {
  const auto apply = [](const fake_environment& environment) {
    DefragConfig config;
    soaheap::apply_defrag_env_overrides(config, heap_classes, environment.getenv());
  };
  // Global n = 40 is too large for Shark (capacity 32).
  EXPECT_TRUE(throws_config_error(
      [&] {
        apply({{"SOAHEAP_DEFRAG_FACTOR", "40"}});
      },
      {"SOAHEAP_DEFRAG_FACTOR", "40", "Shark", "32"}));
  // ... unless Shark gets its own factor.
  EXPECT_NO_THROW(apply({{"SOAHEAP_DEFRAG_FACTOR", "40"}, {"SOAHEAP_DEFRAG_FACTOR_SHARK", "8"}}));
  EXPECT_TRUE(throws_config_error(
      [&] {
        apply({{"SOAHEAP_DEFRAG_FACTOR_FISH", "48"}});
      },
      {"SOAHEAP_DEFRAG_FACTOR_FISH", "48", "Fish", "at most 47"}));
  EXPECT_TRUE(throws_config_error(
      [&] {
        apply({{"SOAHEAP_DEFRAG_FACTOR_GRID", "1"}});
      },
      {"SOAHEAP_DEFRAG_FACTOR_GRID", "Grid", "cannot be defragmented"}));
}

TEST(DefragConfigEnvironment, AmbiguousClassVariableIsRejectedOnlyWhenSet) {
  const std::vector<ClassInfo> classes{{"Fish", 48}, {"FISH", 48}};
  DefragConfig config;
  EXPECT_NO_THROW(soaheap::apply_defrag_env_overrides(config, classes, empty_environment.getenv()));
  const fake_environment environment{{"SOAHEAP_DEFRAG_FACTOR_FISH", "2"}};
  EXPECT_TRUE(throws_config_error([&] { soaheap::apply_defrag_env_overrides(config, classes, environment.getenv()); },
                                  {"SOAHEAP_DEFRAG_FACTOR_FISH", "ambiguous", "\"Fish\"", "\"FISH\""}));
}

// ---------------------------------------------------------------------------
// Bad files: unknown keys, wrong types, syntax errors

TEST(DefragConfigErrors, UnknownKeysAreNamedWithTheAllowedOnes) {
  EXPECT_TRUE(throws_config_error([] { from_toml("[defragment]\nfactor = 2\n"); },
                                  {"<string>:1:2", "defragment", "unknown key", "allowed at the top level: defrag"}));
  EXPECT_TRUE(
      throws_config_error([] { from_toml("[defrag]\nfactr = 2\n"); },
                          {"<string>:2:1", "defrag.factr", "unknown key",
                           "policy, factor, retained_candidates, min_compactions, every, mass_threshold, auto_budget, "
                           "locality_window, release_memory, map_fresh_blocks, classes"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag.classes.Fish]\nevery = 2\n"); },
                                  {"defrag.classes.Fish.every", "unknown key",
                                   "allowed in defrag.classes.Fish: factor, retained_candidates, min_compactions, "
                                   "locality_window, order"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"k1": 16}})"); }, {"defrag.k1", "unknown key"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"version": 1})"); }, {"version", "unknown key"}));
}

TEST(DefragConfigErrors, WrongTypesNameKeyAndValue) {
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag]\nfactor = \"2\"\n"); },
                                  {"<string>:2:10", "defrag.factor = \"2\"", "expected an integer, got a string"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag]\nfactor = 2.0\n"); },
                                  {"defrag.factor = 2.0", "expected an integer, got a floating-point number"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.factor = 1.5"); }, {"defrag.factor = 1.5"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.factor = true"); }, {"defrag.factor = true", "boolean"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.every = [50]"); }, {"defrag.every = an array"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.every = 1979-05-27"); }, {"defrag.every = 1979-05-27"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.policy = 1"); },
                                  {"defrag.policy = 1", "\"manual\", \"every\", \"mass\""}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.policy = \"Every\""); }, {"defrag.policy = \"Every\""}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.mass_threshold = 2.5"); },
                                  {"defrag.mass_threshold = 2.5", "percentage string"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag = 3"); }, {"defrag = 3", "expected a table"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.classes.Fish = 3"); },
                                  {"defrag.classes.Fish = 3", "expected a table"}));

  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"factor": "2"}})"); },
                                  {"defrag.factor = \"2\"", "expected an integer"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"factor": 2.50}})"); }, {"defrag.factor = 2.5"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"factor": null}})"); }, {"defrag.factor = null"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"retained_candidates": 18446744073709551615}})"); },
                                  {"defrag.retained_candidates = 18446744073709551615", "out of range"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"factor": 3000000000}})"); },
                                  {"defrag.factor = 3000000000", "at most 2147483647"}));
  EXPECT_TRUE(throws_config_error([] { from_json("[1, 2]"); }, {"must be a table", "an array"}));
}

TEST(DefragConfigErrors, OutOfRangeValuesInFiles) {
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.factor = 0"); }, {"defrag.factor = 0", "at least 1"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.retained_candidates = -1"); },
                                  {"defrag.retained_candidates = -1", "at least 0"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.min_compactions = 0"); },
                                  {"defrag.min_compactions = 0", "at least 1"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.every = 0"); }, {"defrag.every = 0", "at least 1"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.mass_threshold = 0"); }, {"defrag.mass_threshold = 0"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.mass_threshold = \"0%\""); },
                                  {"defrag.mass_threshold = \"0%\"", "greater than 0 and at most 100"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.mass_threshold = \"100.5%\""); },
                                  {"defrag.mass_threshold = \"100.5%\"", "at most 100"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"classes": {"Fish": {"min_compactions": -3}}}})"); },
                                  {"defrag.classes.Fish.min_compactions = -3", "at least 1"}));
}

TEST(DefragConfigErrors, FactorMustBeBelowEveryClassCapacity) {
  // The global n is checked against each class that uses it, naming the class.
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag]\nfactor = 40\n"); },
                                  {"<string>:2:10", "defrag.factor = 40", "at most 31", "\"Shark\"", "32"}));
  // Capacity-1 classes cannot be defragmented: ignored for the global n ...
  EXPECT_NO_THROW(from_toml("[defrag]\nfactor = 31\n"));
  // ... but an explicit factor for them is a mistake.
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag.classes.Grid]\nfactor = 1\n"); },
                                  {"defrag.classes.Grid.factor = 1", "\"Grid\"", "cannot be defragmented"}));
  EXPECT_NO_THROW(from_toml("[defrag.classes.Grid]\nretained_candidates = 2\n"));
}

TEST(DefragConfigErrors, FileErrorsNameTheFile) {
  const std::string toml_path = data_path("defrag_factor_too_large.toml");
  EXPECT_TRUE(throws_config_error([&] { soaheap::load_defrag_config_file(toml_path, heap_classes); },
                                  {toml_path + ":6:10", "defrag.classes.Fish.factor = 48", "at most 47", "\"Fish\""}));
  const std::string json_path = data_path("defrag_factor_too_large.json");
  EXPECT_TRUE(throws_config_error([&] { soaheap::load_defrag_config_file(json_path, heap_classes); },
                                  {json_path, "defrag.classes.Fish.factor = 48", "at most 47"}));
}

TEST(DefragConfigErrors, SyntaxErrorsNameFileLineAndColumn) {
  const std::string toml_path = data_path("defrag_syntax_error.toml");
  EXPECT_TRUE(throws_config_error([&] { soaheap::load_defrag_config_file(toml_path, heap_classes); },
                                  {toml_path + ":3:", "invalid TOML"}));
  const std::string json_path = data_path("defrag_syntax_error.json");
  EXPECT_TRUE(throws_config_error([&] { soaheap::load_defrag_config_file(json_path, heap_classes); },
                                  {json_path, "invalid JSON", "line 5, column 3"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag]\nfactor = 2\nfactor = 3\n"); }, {"<string>:3:"}));
  EXPECT_TRUE(throws_config_error([] { from_json(""); }, {"<string>", "invalid JSON"}));
}

TEST(DefragConfigErrors, DuplicateJsonKeysAreRejected) {
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"factor": 2, "factor": 4}})"); },
                                  {"duplicate key defrag.factor"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"classes": {"Fish": {}, "Fish": {"factor": 2}}}})"); },
                                  {"duplicate key defrag.classes.Fish"}));
}

TEST(DefragConfigErrors, UnknownClassesAreNamedWithTheKnownOnes) {
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag.classes.Fsh]\nfactor = 2\n"); },
                                  {"defrag.classes.Fsh", "unknown class \"Fsh\"", "Fish, Shark, Cell, Grid"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"classes": {"Whale": {}}}})"); },
                                  {"defrag.classes.Whale", "unknown class"}));
}

TEST(DefragConfigErrors, UnsupportedOrMissingFiles) {
  EXPECT_TRUE(throws_config_error([] { soaheap::load_defrag_config_file("settings.yaml", heap_classes); },
                                  {"settings.yaml", "\".yaml\"", ".toml or .json"}));
  EXPECT_TRUE(throws_config_error([] { soaheap::load_defrag_config_file("settings", heap_classes); },
                                  {"\"settings\"", "no extension"}));
  EXPECT_TRUE(throws_config_error([] { soaheap::load_defrag_config_file("/nonexistent/defrag.toml", heap_classes); },
                                  {"/nonexistent/defrag.toml", "no such file"}));
  EXPECT_TRUE(throws_config_error(
      [] {
        soaheap::load_defrag_config(std::string("/nonexistent/defrag.json"), heap_classes, empty_environment.getenv());
      },
      {"/nonexistent/defrag.json"}));
}

// ---------------------------------------------------------------------------
// validate() on configurations built in code

TEST(DefragConfigValidate, DefaultConfigIsValid) { EXPECT_NO_THROW(soaheap::validate(DefragConfig{}, heap_classes)); }

TEST(DefragConfigValidate, PolicyRequirements) {
  DefragConfig every;
  every.policy = DefragPolicyKind::every;
  EXPECT_TRUE(throws_config_error([&] { soaheap::validate(every, heap_classes); },
                                  {"defrag.every = 0", "policy \"every\"", "SOAHEAP_DEFRAG_EVERY"}));
  every.every = 50;
  EXPECT_NO_THROW(soaheap::validate(every, heap_classes));

  DefragConfig mass;
  mass.policy = DefragPolicyKind::mass;
  EXPECT_TRUE(throws_config_error([&] { soaheap::validate(mass, heap_classes); },
                                  {"defrag.mass_threshold = 0", "policy \"mass\"", "SOAHEAP_DEFRAG_MASS_THRESHOLD"}));
  mass.mass_threshold = {2.5, true};
  EXPECT_NO_THROW(soaheap::validate(mass, heap_classes));

  // The policy file may leave m to the environment; load_defrag_config checks the final result.
  EXPECT_TRUE(throws_config_error(
      [] {
        soaheap::load_defrag_config(std::nullopt, heap_classes,
                                    fake_environment{{"SOAHEAP_DEFRAG_POLICY", "every"}}.getenv());
      },
      {"defrag.every"}));
}

TEST(DefragConfigValidate, BadValuesAreNamed) {
  const auto expect_rejected = [](const std::function<void(DefragConfig&)>& spoil,
                                  std::initializer_list<std::string_view> fragments) {
    DefragConfig config;
    spoil(config);
    return throws_config_error([&] { soaheap::validate(config, heap_classes); }, fragments);
  };
  EXPECT_TRUE(expect_rejected([](DefragConfig& c) { c.factor = 0; }, {"defrag.factor = 0"}));
  EXPECT_TRUE(expect_rejected([](DefragConfig& c) { c.factor = 32; }, {"defrag.factor = 32", "\"Shark\""}));
  EXPECT_TRUE(
      expect_rejected([](DefragConfig& c) { c.retained_candidates = -4; }, {"defrag.retained_candidates = -4"}));
  EXPECT_TRUE(expect_rejected([](DefragConfig& c) { c.min_compactions = 0; }, {"defrag.min_compactions = 0"}));
  EXPECT_TRUE(expect_rejected([](DefragConfig& c) { c.every = -1; }, {"defrag.every = -1"}));
  EXPECT_TRUE(expect_rejected(
      [](DefragConfig& c) {
        c.mass_threshold = {0, true};
      },
      {"defrag.mass_threshold = 0.0%", "greater than 0"}));
  EXPECT_TRUE(expect_rejected(
      [](DefragConfig& c) {
        c.mass_threshold = {250, true};
      },
      {"defrag.mass_threshold = 250.0%", "at most 100"}));
  EXPECT_TRUE(expect_rejected(
      [](DefragConfig& c) {
        c.mass_threshold = {-5, false};
      },
      {"defrag.mass_threshold = -5", "at least 1"}));
  EXPECT_TRUE(expect_rejected(
      [](DefragConfig& c) {
        c.mass_threshold = {12.5, false};
      },
      {"defrag.mass_threshold = 12.5", "whole number"}));
  EXPECT_TRUE(expect_rejected([](DefragConfig& c) { c.classes["Whale"].factor = 2; },
                              {"defrag.classes.Whale", "unknown class \"Whale\""}));
  EXPECT_TRUE(expect_rejected([](DefragConfig& c) { c.classes["Fish"].factor = 48; },
                              {"defrag.classes.Fish.factor = 48", "at most 47"}));
  EXPECT_TRUE(expect_rejected([](DefragConfig& c) { c.classes["Fish"].retained_candidates = -1; },
                              {"defrag.classes.Fish.retained_candidates = -1"}));
  EXPECT_TRUE(expect_rejected([](DefragConfig& c) { c.classes["Grid"].factor = 1; },
                              {"defrag.classes.Grid.factor = 1", "cannot be defragmented"}));
  EXPECT_TRUE(
      expect_rejected([](DefragConfig& c) { c.policy = static_cast<DefragPolicyKind>(7); }, {"defrag.policy = 7"}));
}

TEST(DefragConfigValidate, ErrorCarriesTheKey) {
  DefragConfig config;
  config.classes["Fish"].factor = 60;
  try {
    soaheap::validate(config, heap_classes);
    FAIL() << "expected config_error";
  } catch (const config_error& error) {
    EXPECT_EQ(error.key(), "defrag.classes.Fish.factor");
  }
}

// ---------------------------------------------------------------------------
// Policy names and CLI policy specs

TEST(DefragPolicy, NamesRoundTrip) {
  for (const DefragPolicyKind kind : {DefragPolicyKind::manual, DefragPolicyKind::every, DefragPolicyKind::mass}) {
    EXPECT_EQ(soaheap::parse_policy_kind(soaheap::to_string(kind)), kind);
  }
  EXPECT_TRUE(throws_config_error([] { soaheap::parse_policy_kind("always"); },
                                  {"\"always\"", "\"manual\", \"every\", \"mass\""}));
  EXPECT_TRUE(throws_config_error([] { soaheap::parse_policy_kind(""); }, {"\"\""}));
}

TEST(DefragPolicy, SpecsSetPolicyAndParameter) {
  DefragConfig config;
  config.factor = 4;

  soaheap::apply_policy_spec(config, "every:50");
  EXPECT_EQ(config.policy, DefragPolicyKind::every);
  EXPECT_EQ(config.every, 50);

  soaheap::apply_policy_spec(config, "mass:5000");
  EXPECT_EQ(config.policy, DefragPolicyKind::mass);
  EXPECT_DOUBLE_EQ(config.mass_threshold.value, 5000);
  EXPECT_FALSE(config.mass_threshold.is_percent);

  soaheap::apply_policy_spec(config, "mass:2.5%");
  EXPECT_DOUBLE_EQ(config.mass_threshold.value, 2.5);
  EXPECT_TRUE(config.mass_threshold.is_percent);

  soaheap::apply_policy_spec(config, "none");
  EXPECT_EQ(config.policy, DefragPolicyKind::manual);
  soaheap::apply_policy_spec(config, "manual");
  EXPECT_EQ(config.policy, DefragPolicyKind::manual);

  EXPECT_EQ(config.factor, 4);  // untouched
  EXPECT_EQ(config.every, 50);  // kept from the earlier spec
}

TEST(DefragPolicy, BadSpecsAreNamed) {
  for (const std::string bad :
       {"", "sometimes", "every", "every:", "every:0", "every:-5", "every:x", "every:50:3", "every: 50", "mass",
        "mass:", "mass:0", "mass:0%", "mass:101%", "mass:abc", "none:1", "EVERY:50"}) {
    SCOPED_TRACE(bad);
    DefragConfig config;
    EXPECT_TRUE(throws_config_error([&] { soaheap::apply_policy_spec(config, bad); },
                                    {"invalid defrag policy spec \"" + bad + "\"", "every:M"}));
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// The auto policy and its budget (file, environment, policy spec)

namespace {

TEST(DefragConfigAuto, BudgetFromFileEnvironmentAndSpec) {
  EXPECT_DOUBLE_EQ(DefragConfig{}.auto_budget, 0.02);
  const DefragConfig file = from_json(R"({"defrag": {"policy": "auto", "auto_budget": "5%"}})");
  EXPECT_EQ(file.policy, DefragPolicyKind::automatic);
  EXPECT_DOUBLE_EQ(file.auto_budget, 0.05);
  EXPECT_DOUBLE_EQ(from_toml("[defrag]\npolicy = \"auto\"\nauto_budget = 0.1\n").auto_budget, 0.1);

  DefragConfig config;
  const fake_environment environment{{"SOAHEAP_DEFRAG_POLICY", "auto"}, {"SOAHEAP_DEFRAG_AUTO_BUDGET", "1.5%"}};
  soaheap::apply_defrag_env_overrides(config, heap_classes, environment.getenv());
  EXPECT_EQ(config.policy, DefragPolicyKind::automatic);
  EXPECT_DOUBLE_EQ(config.auto_budget, 0.015);

  DefragConfig from_spec;
  soaheap::apply_policy_spec(from_spec, "auto");
  EXPECT_EQ(from_spec.policy, DefragPolicyKind::automatic);
  EXPECT_DOUBLE_EQ(from_spec.auto_budget, 0.02);
  soaheap::apply_policy_spec(from_spec, "auto:3%");
  EXPECT_DOUBLE_EQ(from_spec.auto_budget, 0.03);
  EXPECT_EQ(soaheap::to_string(DefragPolicyKind::automatic), "auto");
  EXPECT_EQ(soaheap::parse_policy_kind("auto"), DefragPolicyKind::automatic);
}

TEST(DefragConfigAuto, BadBudgetsNameTheValue) {
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"auto_budget": 0}})"); }, {"defrag.auto_budget", "above 0"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"auto_budget": "150%"}})"); }, {"150%"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"auto_budget": true}})"); }, {"defrag.auto_budget"}));
  DefragConfig config;
  EXPECT_TRUE(throws_config_error([&] { soaheap::apply_policy_spec(config, "auto:lots"); }, {"auto:lots", "lots"}));
  const fake_environment environment{{"SOAHEAP_DEFRAG_AUTO_BUDGET", "-1"}};
  EXPECT_TRUE(throws_config_error(
      [&] { soaheap::apply_defrag_env_overrides(config, heap_classes, environment.getenv()); },
      {"SOAHEAP_DEFRAG_AUTO_BUDGET", "-1"}));
  config.auto_budget = 2.0;
  EXPECT_TRUE(throws_config_error([&] { soaheap::validate(config, heap_classes); }, {"defrag.auto_budget"}));
}

}  // namespace

// ---------------------------------------------------------------------------
// Locality window (blocks per window of the plan strategy; 0 = off)

namespace {

TEST(DefragConfigLocality, WindowFromTomlJsonAndEnvironment) {
  EXPECT_EQ(DefragConfig{}.locality_window, 0) << "off by default";
  const DefragConfig toml = from_toml("[defrag]\nlocality_window = 4096\n[defrag.classes.Shark]\nlocality_window = 64\n");
  EXPECT_EQ(toml.locality_window, 4096);
  EXPECT_EQ(toml.locality_window_for("Fish"), 4096);
  EXPECT_EQ(toml.locality_window_for("Shark"), 64);
  const DefragConfig json = from_json(R"({"defrag": {"locality_window": 512, "classes": {"Fish": {"locality_window": 0}}}})");
  EXPECT_EQ(json.locality_window, 512);
  EXPECT_EQ(json.locality_window_for("Fish"), 0);
  EXPECT_EQ(json.locality_window_for("Cell"), 512);
  EXPECT_NO_THROW(soaheap::validate(json, heap_classes));

  const fake_environment environment{{"SOAHEAP_DEFRAG_LOCALITY_WINDOW", "1024"},
                                     {"SOAHEAP_DEFRAG_LOCALITY_WINDOW_CELL", "128"}};
  const DefragConfig config = soaheap::load_defrag_config(std::nullopt, heap_classes, environment.getenv());
  EXPECT_EQ(config.locality_window, 1024);
  EXPECT_EQ(config.locality_window_for("Cell"), 128);
  EXPECT_EQ(config.locality_window_for("Shark"), 1024);
  // A policy spec changes only the policy: the window stays.
  DefragConfig with_spec = config;
  soaheap::apply_policy_spec(with_spec, "auto");
  EXPECT_EQ(with_spec.locality_window, 1024);
}

TEST(DefragConfigLocality, BadWindowsNameKeyAndValue) {
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.locality_window = -1"); },
                                  {"<string>:1:26", "defrag.locality_window = -1", "at least 0"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.locality_window = 64.0"); },
                                  {"defrag.locality_window = 64.0", "expected an integer"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"locality_window": "4096"}})"); },
                                  {"defrag.locality_window = \"4096\"", "expected an integer, got a string"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"classes": {"Fish": {"locality_window": -64}}}})"); },
                                  {"defrag.classes.Fish.locality_window = -64", "at least 0"}));
  for (const std::string bad : {"-1", "4k", "", "1e3"}) {
    SCOPED_TRACE(bad);
    const fake_environment environment{{"SOAHEAP_DEFRAG_LOCALITY_WINDOW", bad}};
    EXPECT_TRUE(throws_config_error(
        [&] { soaheap::load_defrag_config(std::nullopt, heap_classes, environment.getenv()); },
        {"environment", "SOAHEAP_DEFRAG_LOCALITY_WINDOW = \"" + bad + "\""}));
  }
  DefragConfig config;
  config.locality_window = -5;
  EXPECT_TRUE(throws_config_error([&] { soaheap::validate(config, heap_classes); },
                                  {"defrag.locality_window = -5", "at least 0"}));
  config.locality_window = 0;
  config.classes["Shark"].locality_window = -2;
  EXPECT_TRUE(throws_config_error([&] { soaheap::validate(config, heap_classes); },
                                  {"defrag.classes.Shark.locality_window = -2", "at least 0"}));
}

}  // namespace

TEST(DefragConfigOrder, FromTomlJsonAndEnvironment) {
  EXPECT_FALSE(DefragConfig{}.order_for("Fish")) << "unset: the application's default order";
  const DefragConfig toml = from_toml("[defrag.classes.Fish]\norder = \"field:position\"\n[defrag.classes.Shark]\norder = \"none\"\n");
  EXPECT_EQ(toml.order_for("Fish").value_or(""), "field:position");
  EXPECT_EQ(toml.order_for("Shark").value_or(""), "none");
  EXPECT_FALSE(toml.order_for("Cell"));
  const DefragConfig json = from_json(R"({"defrag": {"classes": {"Cell": {"order": "key:morton_2d"}}}})");
  EXPECT_EQ(json.order_for("Cell").value_or(""), "key:morton_2d");
  EXPECT_NO_THROW(soaheap::validate(json, heap_classes));

  const fake_environment environment{{"SOAHEAP_DEFRAG_ORDER_SHARK", "field:cell"}};
  const DefragConfig config = soaheap::load_defrag_config(std::nullopt, heap_classes, environment.getenv());
  EXPECT_EQ(config.order_for("Shark").value_or(""), "field:cell");
  EXPECT_FALSE(config.order_for("Fish"));
}

TEST(DefragConfigOrder, BadOrdersNameKeyAndValue) {
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag.classes.Fish]\norder = \"position\"\n"); },
                                  {"<string>:2:9", "defrag.classes.Fish.order = \"position\"", "field:NAME"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag.classes.Fish]\norder = 3\n"); },
                                  {"defrag.classes.Fish.order = 3", "\"none\""}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"classes": {"Fish": {"order": "field:1x"}}}})"); },
                                  {"defrag.classes.Fish.order = \"field:1x\""}));
  for (const std::string bad : {"", "field:", "key", "sort:position", "field:a-b"}) {
    SCOPED_TRACE(bad);
    const fake_environment environment{{"SOAHEAP_DEFRAG_ORDER_FISH", bad}};
    EXPECT_TRUE(throws_config_error(
        [&] { soaheap::load_defrag_config(std::nullopt, heap_classes, environment.getenv()); },
        {"environment", "SOAHEAP_DEFRAG_ORDER_FISH = \"" + bad + "\""}));
  }
  DefragConfig config;
  config.classes["Fish"].order = "field:";
  EXPECT_TRUE(throws_config_error([&] { soaheap::validate(config, heap_classes); },
                                  {"defrag.classes.Fish.order = \"field:\""}));
}

// ---------------------------------------------------------------------------
// Releasing the memory of free blocks at the end of a growable heap (unset: on for policy auto)

namespace {

TEST(DefragConfigReleaseMemory, DefaultDependsOnThePolicy) {
  DefragConfig config;
  EXPECT_FALSE(config.release_memory.has_value()) << "unset by default";
  const std::pair<DefragPolicyKind, bool> expected[] = {{DefragPolicyKind::automatic, true},
                                                        {DefragPolicyKind::manual, false},
                                                        {DefragPolicyKind::every, false},
                                                        {DefragPolicyKind::mass, false}};
  for (const auto& [policy, releases] : expected) {
    SCOPED_TRACE(std::string(soaheap::to_string(policy)));
    config.policy = policy;
    EXPECT_EQ(config.releases_memory(), releases);
  }
  // Set, it wins over the policy in both directions.
  config.policy = DefragPolicyKind::automatic;
  config.release_memory = false;
  EXPECT_FALSE(config.releases_memory());
  config.policy = DefragPolicyKind::manual;
  config.release_memory = true;
  EXPECT_TRUE(config.releases_memory());
  // A file that does not mention it leaves it unset; a policy spec does not touch it.
  EXPECT_FALSE(from_toml("[defrag]\npolicy = \"auto\"\n").release_memory.has_value());
  EXPECT_TRUE(from_toml("[defrag]\npolicy = \"auto\"\n").releases_memory());
  EXPECT_FALSE(from_json(R"({"defrag": {"policy": "every", "every": 5}})").releases_memory());
  soaheap::apply_policy_spec(config, "mass:5000");
  EXPECT_EQ(config.release_memory, std::optional<bool>(true));
}

TEST(DefragConfigReleaseMemory, FromTomlAndJson) {
  const DefragConfig toml_on = from_toml("[defrag]\nrelease_memory = true\n");
  EXPECT_EQ(toml_on.release_memory, std::optional<bool>(true));
  EXPECT_TRUE(toml_on.releases_memory()) << "set beats the manual policy's default";
  const DefragConfig toml_off = from_toml("[defrag]\npolicy = \"auto\"\nrelease_memory = false\n");
  EXPECT_EQ(toml_off.release_memory, std::optional<bool>(false));
  EXPECT_FALSE(toml_off.releases_memory()) << "set beats the auto policy's default";

  const DefragConfig json_on = from_json(R"({"defrag": {"policy": "mass", "mass_threshold": 10, "release_memory": true}})");
  EXPECT_EQ(json_on.release_memory, std::optional<bool>(true));
  EXPECT_TRUE(json_on.releases_memory());
  const DefragConfig json_off = from_json(R"({"defrag": {"policy": "auto", "release_memory": false}})");
  EXPECT_EQ(json_off.release_memory, std::optional<bool>(false));
  EXPECT_FALSE(json_off.releases_memory());
  EXPECT_NO_THROW(soaheap::validate(json_off, heap_classes));
}

TEST(DefragConfigReleaseMemory, FromEnvironmentOverFile) {
  for (const auto& [text, on] : std::vector<std::pair<std::string, bool>>{
           {"true", true}, {"1", true}, {"on", true}, {"false", false}, {"0", false}, {"off", false}}) {
    SCOPED_TRACE(text);
    const fake_environment environment{{"SOAHEAP_DEFRAG_RELEASE_MEMORY", text}};
    DefragConfig config;
    config.release_memory = !on;  // as a file might have set it: the environment overrides it
    soaheap::apply_defrag_env_overrides(config, heap_classes, environment.getenv());
    EXPECT_EQ(config.release_memory, std::optional<bool>(on));
  }
  // Through load_defrag_config: a file's value, then the environment's.
  const DefragConfig from_file =
      soaheap::load_defrag_config(data_path("defrag_valid.toml"), heap_classes, empty_environment.getenv());
  EXPECT_FALSE(from_file.release_memory.has_value());
  EXPECT_FALSE(from_file.releases_memory()) << "policy mass, unset: off";
  const fake_environment environment{{"SOAHEAP_DEFRAG_RELEASE_MEMORY", "on"}};
  const DefragConfig overridden =
      soaheap::load_defrag_config(data_path("defrag_valid.toml"), heap_classes, environment.getenv());
  EXPECT_TRUE(overridden.releases_memory());
  const fake_environment auto_off{{"SOAHEAP_DEFRAG_POLICY", "auto"}, {"SOAHEAP_DEFRAG_RELEASE_MEMORY", "false"}};
  const DefragConfig automatic = soaheap::load_defrag_config(std::nullopt, heap_classes, auto_off.getenv());
  EXPECT_EQ(automatic.policy, DefragPolicyKind::automatic);
  EXPECT_FALSE(automatic.releases_memory());
}

TEST(DefragConfigReleaseMemory, BadValuesNameKeyAndValue) {
  for (const std::string bad : {"", "yes", "2", "TRUE", "On", " true", "true "}) {
    SCOPED_TRACE(bad);
    const fake_environment environment{{"SOAHEAP_DEFRAG_RELEASE_MEMORY", bad}};
    DefragConfig config;
    EXPECT_TRUE(throws_config_error(
        [&] { soaheap::apply_defrag_env_overrides(config, heap_classes, environment.getenv()); },
        {"environment", "SOAHEAP_DEFRAG_RELEASE_MEMORY = \"" + bad + "\"", "\"true\"", "\"off\""}));
  }
  try {
    soaheap::load_defrag_config(std::nullopt, heap_classes,
                                fake_environment{{"SOAHEAP_DEFRAG_RELEASE_MEMORY", "maybe"}}.getenv());
    ADD_FAILURE() << "\"maybe\" was accepted";
  } catch (const config_error& error) {
    EXPECT_EQ(error.key(), "SOAHEAP_DEFRAG_RELEASE_MEMORY");
  }
  // Files take a real boolean: no strings, no numbers.
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag]\nrelease_memory = \"true\"\n"); },
                                  {"<string>:2:18", "defrag.release_memory = \"true\"",
                                   "expected a boolean (true or false), got a string"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("defrag.release_memory = 1"); },
                                  {"defrag.release_memory = 1", "got an integer"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"release_memory": "on"}})"); },
                                  {"defrag.release_memory = \"on\"", "expected a boolean"}));
  EXPECT_TRUE(throws_config_error([] { from_json(R"({"defrag": {"release_memory": null}})"); },
                                  {"defrag.release_memory = null", "expected a boolean"}));
  // A global key only: not accepted per class.
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag.classes.Fish]\nrelease_memory = true\n"); },
                                  {"defrag.classes.Fish.release_memory", "unknown key"}));
  // A misspelling is still an unknown key, and the message offers the right one.
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag]\nrelease_mem = true\n"); },
                                  {"defrag.release_mem", "unknown key", "release_memory"}));
}

// ---------------------------------------------------------------------------
// A policy's ordered compaction mapping the fresh blocks it lacks on a growable heap (off by default)

TEST(DefragConfigMapFreshBlocks, OffByDefaultAndSetFromFilesAndTheEnvironment) {
  EXPECT_FALSE(DefragConfig{}.map_fresh_blocks);
  EXPECT_FALSE(from_toml("[defrag]\npolicy = \"auto\"\n").map_fresh_blocks);
  EXPECT_TRUE(from_toml("[defrag]\nmap_fresh_blocks = true\n").map_fresh_blocks);
  EXPECT_TRUE(from_json(R"({"defrag": {"policy": "auto", "map_fresh_blocks": true}})").map_fresh_blocks);
  EXPECT_FALSE(from_json(R"({"defrag": {"map_fresh_blocks": false}})").map_fresh_blocks);
  for (const auto& [text, on] : std::vector<std::pair<std::string, bool>>{{"on", true}, {"1", true}, {"off", false}}) {
    SCOPED_TRACE(text);
    DefragConfig config;
    config.map_fresh_blocks = !on;  // as a file might have set it: the environment overrides it
    soaheap::apply_defrag_env_overrides(config, heap_classes,
                                        fake_environment{{"SOAHEAP_DEFRAG_MAP_FRESH_BLOCKS", text}}.getenv());
    EXPECT_EQ(config.map_fresh_blocks, on);
  }
}

TEST(DefragConfigMapFreshBlocks, BadValuesNameKeyAndValue) {
  DefragConfig config;
  EXPECT_TRUE(throws_config_error(
      [&] {
        soaheap::apply_defrag_env_overrides(config, heap_classes,
                                            fake_environment{{"SOAHEAP_DEFRAG_MAP_FRESH_BLOCKS", "yes"}}.getenv());
      },
      {"environment", "SOAHEAP_DEFRAG_MAP_FRESH_BLOCKS = \"yes\""}));
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag]\nmap_fresh_blocks = 1\n"); },
                                  {"defrag.map_fresh_blocks = 1", "got an integer"}));
  EXPECT_TRUE(throws_config_error([] { from_toml("[defrag.classes.Fish]\nmap_fresh_blocks = true\n"); },
                                  {"defrag.classes.Fish.map_fresh_blocks", "unknown key"}));
}

}  // namespace
