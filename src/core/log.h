// Minimal leveled logging to stderr. Library code logs sparingly; user-facing
// errors are returned as Status and printed by the CLI as "error: ...".
#pragma once

#include <cstdarg>

namespace chimera {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kQuiet = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace chimera

#define CHIMERA_LOG_INFO(...) ::chimera::log_message(::chimera::LogLevel::kInfo, __VA_ARGS__)
#define CHIMERA_LOG_WARN(...) ::chimera::log_message(::chimera::LogLevel::kWarn, __VA_ARGS__)
#define CHIMERA_LOG_DEBUG(...) ::chimera::log_message(::chimera::LogLevel::kDebug, __VA_ARGS__)
