// The library's log is quiet unless asked: warnings and errors by default, per-run lines at
// SOAHEAP_LOG_LEVEL=info or debug (issue 53).
#include <soaheap/base/log.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>

namespace {

using soaheap::log::Level;

TEST(Log, EnvironmentValuesNameTheirLevels) {
  EXPECT_EQ(soaheap::log::level_from_environment(nullptr), Level::warn);
  EXPECT_EQ(soaheap::log::level_from_environment(""), Level::warn);
  EXPECT_EQ(soaheap::log::level_from_environment("trace"), Level::trace);
  EXPECT_EQ(soaheap::log::level_from_environment("debug"), Level::debug);
  EXPECT_EQ(soaheap::log::level_from_environment("info"), Level::info);
  EXPECT_EQ(soaheap::log::level_from_environment("warn"), Level::warn);
  EXPECT_EQ(soaheap::log::level_from_environment("error"), Level::error);
  EXPECT_EQ(soaheap::log::level_from_environment("off"), Level::off);
  EXPECT_THROW(soaheap::log::level_from_environment("loud"), std::invalid_argument);
}

TEST(Log, DefaultIsWarningsAndErrorsAndInfoIsOnlyOnRequest) {
  ::unsetenv("SOAHEAP_LOG_LEVEL");
  soaheap::log::configure_from_environment();
  EXPECT_FALSE(soaheap::log::enabled(Level::info)) << "a library is quiet unless asked";
  EXPECT_FALSE(soaheap::log::enabled(Level::debug));
  EXPECT_TRUE(soaheap::log::enabled(Level::warn));
  EXPECT_TRUE(soaheap::log::enabled(Level::error));

  ::setenv("SOAHEAP_LOG_LEVEL", "info", 1);
  soaheap::log::configure_from_environment();
  EXPECT_TRUE(soaheap::log::enabled(Level::info));
  EXPECT_FALSE(soaheap::log::enabled(Level::debug));

  ::setenv("SOAHEAP_LOG_LEVEL", "debug", 1);
  soaheap::log::configure_from_environment();
  EXPECT_TRUE(soaheap::log::enabled(Level::debug));

  ::unsetenv("SOAHEAP_LOG_LEVEL");
  soaheap::log::configure_from_environment();
  EXPECT_FALSE(soaheap::log::enabled(Level::info));
}

}  // namespace
