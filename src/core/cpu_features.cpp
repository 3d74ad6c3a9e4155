// CPU feature detection. On x86 the OS must also have enabled the register
// state (XCR0) for AVX / AVX-512 / AMX; CPUID alone is not enough.
#include "core/cpu_features.h"

#include <cstdlib>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace chimera {
namespace {

#if defined(__x86_64__) || defined(__i386__)
unsigned long long xgetbv0() {
  unsigned int eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return ((unsigned long long)edx << 32) | eax;
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
  f.logical_cores = (int)std::max(1u, std::thread::hardware_concurrency());
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;
  const bool zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0;
  const bool amx_ok = (xcr0 & 0x60000) == 0x60000;
  f.fma = ymm_ok && ((c >> 12) & 1);
  f.f16c = ymm_ok && ((c >> 29) & 1);
  unsigned a7, b7, c7, d7;
  __cpuid_count(7, 0, a7, b7, c7, d7);
  f.avx2 = ymm_ok && ((b7 >> 5) & 1);
  f.avx512f = zmm_ok && ((b7 >> 16) & 1);
  f.avx512dq = zmm_ok && ((b7 >> 17) & 1);
  f.avx512bw = zmm_ok && ((b7 >> 30) & 1);
  f.avx512vl = zmm_ok && ((b7 >> 31) & 1);
  f.avx512vnni = zmm_ok && ((c7 >> 11) & 1);
  f.amx_bf16 = amx_ok && ((d7 >> 22) & 1);
  f.amx_tile = amx_ok && ((d7 >> 24) & 1);
  f.amx_int8 = amx_ok && ((d7 >> 25) & 1);
  unsigned a71, b71, c71, d71;
  __cpuid_count(7, 1, a71, b71, c71, d71);
  f.avxvnni = ymm_ok && ((a71 >> 4) & 1);
  f.avx512bf16 = zmm_ok && ((a71 >> 5) & 1);
#elif defined(__aarch64__)
  f.neon = true;
#if defined(__linux__)
  f.dotprod = (getauxval(AT_HWCAP) & (1UL << 20)) != 0;
#endif
#endif
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string CpuFeatures::summary() const {
  std::string s;
  auto add = [&](bool on, const char* n) { if (on) { if (!s.empty()) s += ' '; s += n; } };
  add(avx2, "AVX2"); add(fma, "FMA"); add(f16c, "F16C"); add(avx512f, "AVX512F");
  add(avx512bw, "AVX512BW"); add(avx512vnni, "AVX512_VNNI"); add(avx512bf16, "AVX512_BF16");
  add(avxvnni, "AVX_VNNI"); add(amx_tile, "AMX_TILE"); add(amx_int8, "AMX_INT8");
  add(amx_bf16, "AMX_BF16"); add(neon, "NEON"); add(dotprod, "DOTPROD");
  return s.empty() ? "scalar" : s;
}

bool request_amx_permission() {
  if (const char* e = std::getenv("CHIMERA_NO_AMX"); e && std::string(e) == "1") return false;
#if defined(__x86_64__) && defined(__linux__)
  static const bool granted = [] {
    if (!cpu_features().amx_tile) return false;
    constexpr int kArchReqXcompPerm = 0x1023;
    constexpr int kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
#else
  return false;
#endif
}

int default_thread_count() {
  int n = cpu_features().logical_cores;
  return n < 1 ? 1 : n;
}

}  // namespace chimera
