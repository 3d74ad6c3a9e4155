// Internal to the AVX2 kernels of Isa::kAvx2Vnni: the VEX-encoded AVX-VNNI
// dot products on 256-bit vectors (Alder Lake and later, Sapphire Rapids,
// Zen 5), as inline asm: the kernels keep their plain "avx2,fma,f16c" target,
// so no AVX2 code path can contain them, and the "x" operands stay in
// ymm0..15, which the VEX encoding reaches. x86-64 only.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

namespace chimera::kernels::avxvnni {

// s + the 4 products u8 x s8 of each dword (exact int32): vpdpbusd.
__attribute__((target("avx2"), always_inline)) inline __m256i dpbusd(__m256i s, __m256i u, __m256i a) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(s) : "x"(u), "x"(a));
  return s;
}

}  // namespace chimera::kernels::avxvnni

#endif  // __x86_64__
