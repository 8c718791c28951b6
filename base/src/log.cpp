// The library's log on spdlog, compiled once by the C++ compiler (see soaheap/base/log.hpp).
#include <soaheap/base/log.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace soaheap::log {
namespace {

constexpr const char kLoggerName[] = "soaheap";

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::trace: return spdlog::level::trace;
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    case Level::error: return spdlog::level::err;
    default: return spdlog::level::off;
  }
}

/// The level SOAHEAP_LOG_LEVEL asks for now (warnings and errors when it is unset).
spdlog::level::level_enum environment_level() {
  return to_spdlog(level_from_environment(std::getenv("SOAHEAP_LOG_LEVEL")));
}

std::mutex& creation_mutex() {
  static std::mutex creation;
  return creation;
}

/// The logger the library created itself, once it has (never one the application registered).
std::shared_ptr<spdlog::logger>& own_logger() {
  static std::shared_ptr<spdlog::logger> logger;
  return logger;
}

/// The logger named "soaheap": one the application registered, else one the library creates on
/// stderr at the level SOAHEAP_LOG_LEVEL names (default: warnings and errors only).
std::shared_ptr<spdlog::logger> library_logger_locked() {
  if (auto existing = spdlog::get(kLoggerName)) return existing;
  const auto level = environment_level();  // a bad value throws before anything is registered
  own_logger() = spdlog::stderr_color_mt(kLoggerName);
  own_logger()->set_level(level);
  return own_logger();
}

spdlog::logger& library_logger() {
  static std::shared_ptr<spdlog::logger> logger;
  const std::lock_guard<std::mutex> lock(creation_mutex());
  auto current = library_logger_locked();
  if (current != logger) logger = current;
  return *logger;
}

}  // namespace

Level level_from_environment(const char* value) {
  if (value == nullptr || *value == '\0') return Level::warn;
  const std::string name(value);
  if (name == "trace") return Level::trace;
  if (name == "debug") return Level::debug;
  if (name == "info") return Level::info;
  if (name == "warn" || name == "warning") return Level::warn;
  if (name == "error" || name == "err" || name == "critical") return Level::error;
  if (name == "off") return Level::off;
  throw std::invalid_argument("SOAHEAP_LOG_LEVEL=\"" + name +
                              "\" is not a log level (trace, debug, info, warn, error, off)");
}

void configure_from_environment() {
  const auto level = environment_level();
  const std::lock_guard<std::mutex> lock(creation_mutex());
  const auto current = library_logger_locked();
  if (current == own_logger()) current->set_level(level);
}

bool enabled(Level level) { return library_logger().should_log(to_spdlog(level)); }

void write(Level level, const std::string& line) { library_logger().log(to_spdlog(level), line); }

}  // namespace soaheap::log
