#pragma once
/// @file log.hpp
/// @brief The library's log: lines on the "soaheap" spdlog logger, written by a host-compiled
///        function (base/src/log.cpp), so that translation units compiled by nvcc never parse
///        spdlog or fmt. A library is quiet unless asked: by default only warnings and errors
///        are written. SOAHEAP_LOG_LEVEL=info adds one line per defragmentation run and policy
///        decision, =debug the details of each (trace, debug, info, warn, error, off; any other
///        value is an std::invalid_argument naming it). An application may instead register its
///        own spdlog logger named "soaheap" before the library's first line; its level is then
///        the application's.
///
/// Usage: `log::info("defrag ", name, ": ", blocks, " blocks freed in ", log::fixed(ms), " ms")`;
/// the parts are formatted only when the level is enabled.

#include <cstdio>
#include <sstream>
#include <string>

namespace soaheap::log {

enum class Level { trace, debug, info, warn, error, off };

/// @brief The level a value of SOAHEAP_LOG_LEVEL names; null or empty: Level::warn (the default).
/// @throws std::invalid_argument for any other name.
Level level_from_environment(const char* value);
/// @brief Reads SOAHEAP_LOG_LEVEL again and sets the level of the library's own logger (not of a
///        logger the application registered). The library reads it once, at its first line.
void configure_from_environment();

/// @brief Whether lines of @p level reach the log now.
bool enabled(Level level);
/// @brief Writes one line at @p level.
void write(Level level, const std::string& line);

/// @brief @p value with @p digits decimals (the way a time in ms is logged).
inline std::string fixed(double value, int digits = 3) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

/// @brief The parts streamed one after the other into one string.
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <class... Parts>
void at(Level level, const Parts&... parts) {
  if (enabled(level)) write(level, concat(parts...));
}
template <class... Parts>
void debug(const Parts&... parts) {
  at(Level::debug, parts...);
}
template <class... Parts>
void info(const Parts&... parts) {
  at(Level::info, parts...);
}
template <class... Parts>
void warn(const Parts&... parts) {
  at(Level::warn, parts...);
}

}  // namespace soaheap::log
