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

PageRange page_range(const uint8_t* data, size_t bytes, size_t page, bool outward) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data), b = a + bytes;
  PageRange r;
  if (outward) {
    r.begin = a / page * page;
    r.end = (b + page - 1) / page * page;
  } else {
    r.begin = (a + page - 1) / page * page;
    r.end = b / page * page;
    if (r.end < r.begin) r.end = r.begin;
  }
  return r;
}

}  // namespace chimera
