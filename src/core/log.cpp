// Logging implementation.
#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace chimera {
namespace {
std::atomic<int> g_level{(int)LogLevel::kWarn};
}

void set_log_level(LogLevel level) { g_level = (int)level; }
LogLevel log_level() { return (LogLevel)g_level.load(); }

void log_message(LogLevel level, const char* fmt, ...) {
  if ((int)level < g_level.load()) return;
  static const char* kNames[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "%s: ", kNames[(int)level]);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

}  // namespace chimera
