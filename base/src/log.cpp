// The library's log on spdlog, compiled once by the C++ compiler (see soaheap/base/log.hpp).
#include <soaheap/base/log.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <mutex>

namespace soaheap::log {
namespace {

constexpr const char kLoggerName[] = "soaheap";

/// An existing logger named "soaheap" (an application may register its own), else a new one on
/// stderr whose level SOAHEAP_LOG_LEVEL sets.
spdlog::logger& library_logger() {
  static std::mutex creation;
  static std::shared_ptr<spdlog::logger> logger;
  const std::lock_guard<std::mutex> lock(creation);
  if (auto existing = spdlog::get(kLoggerName)) {
    logger = existing;
  } else if (!logger) {
    logger = spdlog::stderr_color_mt(kLoggerName);
    if (const char* level = std::getenv("SOAHEAP_LOG_LEVEL")) logger->set_level(spdlog::level::from_str(level));
  }
  return *logger;
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::trace: return spdlog::level::trace;
    case Level::debug: return spdlog::level::debug;
    case Level::info: return spdlog::level::info;
    case Level::warn: return spdlog::level::warn;
    default: return spdlog::level::err;
  }
}

}  // namespace

bool enabled(Level level) { return library_logger().should_log(to_spdlog(level)); }

void write(Level level, const std::string& line) { library_logger().log(to_spdlog(level), line); }

}  // namespace soaheap::log
