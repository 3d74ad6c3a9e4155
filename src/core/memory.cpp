// Process memory statistics from /proc/self/status.
#include "core/memory.h"

#include <cstdio>
#include <cstring>

namespace chimera {
namespace {
uint64_t read_status_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  const size_t klen = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, klen) == 0) {
      unsigned long long v = 0;
      if (std::sscanf(line + klen, " %llu", &v) == 1) kb = v;
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}
}  // namespace

uint64_t peak_rss_bytes() { return read_status_kb("VmHWM:"); }
uint64_t current_rss_bytes() { return read_status_kb("VmRSS:"); }

}  // namespace chimera
