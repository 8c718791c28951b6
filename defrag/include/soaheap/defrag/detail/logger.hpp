#pragma once
/// @file detail/logger.hpp
/// @brief The "soaheap" spdlog logger used by defragmentation (created on first use; its level comes
///        from SOAHEAP_LOG_LEVEL when set, e.g. SOAHEAP_LOG_LEVEL=debug for per-pass lines).

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <mutex>

namespace soaheap::detail {

inline constexpr const char kLoggerName[] = "soaheap";

/// @brief The library's logger: an existing logger named "soaheap" (an application may register its
/// own), else a new one on stderr.
inline std::shared_ptr<spdlog::logger> library_logger() {
  static std::mutex creation;
  const std::lock_guard<std::mutex> lock(creation);
  if (auto existing = spdlog::get(kLoggerName)) return existing;
  auto logger = spdlog::stderr_color_mt(kLoggerName);
  if (const char* level = std::getenv("SOAHEAP_LOG_LEVEL")) logger->set_level(spdlog::level::from_str(level));
  return logger;
}

}  // namespace soaheap::detail
