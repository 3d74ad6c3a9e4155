// Process memory statistics from /proc/self/status.
#include "core/memory.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

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

void* alloc_huge_aligned(size_t bytes) {
  constexpr size_t kHuge = 2u << 20;
  if (bytes < kHuge) {
    void* p = std::aligned_alloc(kAlign, std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign));
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, rounded);
  if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  static const bool off = [] { const char* v = std::getenv("CHIMERA_HUGEPAGES"); return v && v[0] == '0'; }();
  if (!off) madvise(p, rounded, MADV_HUGEPAGE);  // advisory: ignored where THP is off
#endif
  return p;
}

}  // namespace chimera
