// Process memory statistics from /proc/self/status.
#include "core/memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
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

void advise_pages(const void* p, size_t n, bool outward, int advice) {
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return;
  const PageRange r = page_range(static_cast<const uint8_t*>(p), n, (size_t)page, outward);
  if (r.bytes() > 0) madvise(reinterpret_cast<void*>(r.begin), r.bytes(), advice);
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

void* alloc_aligned(size_t bytes, bool huge) {
  constexpr size_t kHuge = 2u << 20;
  const size_t size = aligned_size(bytes);
  const bool use_huge = huge && size >= kHuge;
  const size_t alloc = use_huge ? (size + kHuge - 1) / kHuge * kHuge : size;
  void* p = std::aligned_alloc(use_huge ? kHuge : kAlign, alloc);
  if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (use_huge && huge_pages_available()) madvise(p, alloc, MADV_HUGEPAGE);  // advisory
#endif
  return p;
}

}  // namespace chimera
