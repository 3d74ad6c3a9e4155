// ISA probing and selection. Highway kernels follow the active ISA because
// set_active_isa() restricts hwy's supported-target mask to the targets at or
// below the chosen level (Highway picks the best remaining one on dispatch).
#include "kernels/dispatch.h"

#include <atomic>

#include <hwy/targets.h>

#include "core/cpu_features.h"

namespace chimera::kernels {
namespace {

std::atomic<int> g_active{-1};

int64_t hwy_mask_for(Isa isa) {
  // Lower bits are better targets in Highway; we enable the chosen target and
  // the portable fallbacks so dispatch always finds one.
  int64_t fallback = HWY_EMU128 | HWY_SCALAR;
  switch (isa) {
    case Isa::kScalar: return fallback;
    case Isa::kAvx2:
    case Isa::kAvx2Vnni: return fallback | HWY_SSSE3 | HWY_SSE4 | HWY_AVX2;  // Highway has no AVX-VNNI target
    case Isa::kAvx512: return fallback | HWY_SSSE3 | HWY_SSE4 | HWY_AVX2 | HWY_AVX3;
    case Isa::kAvx512Vnni:
    case Isa::kAmx: return fallback | HWY_SSSE3 | HWY_SSE4 | HWY_AVX2 | HWY_AVX3 | HWY_AVX3_DL;
    case Isa::kNeon: return fallback | HWY_NEON;
  }
  return fallback;
}

// Highway's real target set, read before any mock is installed
// (SupportedTargets() returns the mock once one is set).
int64_t real_hwy_targets() {
  static const int64_t t = [] {
    hwy::SetSupportedTargetsForTest(0);
    return hwy::SupportedTargets();
  }();
  return t;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx2Vnni: return "avx2vnni";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAmx: return "amx";
    case Isa::kNeon: return "neon";
  }
  return "?";
}

std::vector<Isa> available_isas() {
  const CpuFeatures& f = cpu_features();
  std::vector<Isa> v{Isa::kScalar};
#if defined(__x86_64__) || defined(__i386__)
  if (f.avx2 && f.fma && f.f16c) v.push_back(Isa::kAvx2);
  if (f.avx2 && f.fma && f.f16c && f.avxvnni) v.push_back(Isa::kAvx2Vnni);
  if (f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl) v.push_back(Isa::kAvx512);
  if (v.back() == Isa::kAvx512 && f.avx512vnni && f.avx512bf16) v.push_back(Isa::kAvx512Vnni);
  // AMX tiles fault until the kernel grants the tile state: asked once, and
  // the level is left out when refused (or CHIMERA_NO_AMX=1 skips the request).
  if (v.back() == Isa::kAvx512Vnni && f.amx_tile && f.amx_int8 && request_amx_permission()) v.push_back(Isa::kAmx);
#elif defined(__aarch64__)
  if (f.neon) v.push_back(Isa::kNeon);
#endif
  return v;
}

Isa best_isa() { return available_isas().back(); }

Isa active_isa() {
  int a = g_active.load(std::memory_order_relaxed);
  if (a < 0) {
    Isa b = best_isa();
    set_active_isa(b);
    return b;
  }
  return (Isa)a;
}

void set_active_isa(Isa isa) {
  g_active.store((int)isa, std::memory_order_relaxed);
  hwy::SetSupportedTargetsForTest(hwy_mask_for(isa) & real_hwy_targets());
}

bool parse_isa(const std::string& name, Isa* out) {
  for (Isa i : {Isa::kScalar, Isa::kAvx2, Isa::kAvx2Vnni, Isa::kAvx512, Isa::kAvx512Vnni, Isa::kAmx, Isa::kNeon}) {
    if (name == isa_name(i)) {
      *out = i;
      return true;
    }
  }
  return false;
}

Isa layout_isa(Isa isa) { return isa == Isa::kAmx ? Isa::kAvx512Vnni : isa; }

}  // namespace chimera::kernels
