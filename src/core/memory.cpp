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

bool huge_pages_available() {
  static const bool available = [] {
    const char* v = std::getenv("CHIMERA_HUGEPAGES");
    if (v && v[0] == '0') return false;
    FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return false;
    char line[128] = {0};
    const bool ok = std::fgets(line, sizeof line, f) && (std::strstr(line, "[always]") || std::strstr(line, "[madvise]"));
    std::fclose(f);
    return ok;
  }();
  return available;
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
  if (huge_pages_available()) madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace chimera
