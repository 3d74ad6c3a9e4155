// Internal to the AVX2 x16 kernels (matmul_kquant_x16_*_avx2.cpp,
// matmul_iq4xs_x16_avx2.cpp; the packed ternary GEMV takes load_reg): target
// attributes and the small vector helpers they share (the AVX-512 ones are
// matmul_kquant_x16_simd.h). x86-64 only.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#define CHIMERA_T_X16A2 __attribute__((target("avx2,fma,f16c")))
#define CHIMERA_T_X16A2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace chimera::kernels::x16a2 {

// vpshufb control (per 128-bit lane): dword i = words (plane byte 4i + u0,
// plane byte 4i + u1), zero-extended.
CHIMERA_T_X16A2_INLINE __m256i pick_words(int u0, int u1) {
  const int ctl = u0 | (0x80 << 8) | (u1 << 16) | (0x80 << 24);
  const __m128i v = _mm_add_epi32(_mm_set1_epi32(ctl), _mm_setr_epi32(0, 4 | 4 << 16, 8 | 8 << 16, 12 | 12 << 16));
  return _mm256_broadcastsi128_si256(v);
}

// The 4 bytes at p in every 32-bit lane.
CHIMERA_T_X16A2_INLINE __m256i bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

CHIMERA_T_X16A2_INLINE __m256i loadu(const uint8_t* p) { return _mm256_loadu_si256((const __m256i*)p); }

// The same load as an opaque register value (asm): GCC neither folds it into
// each of its users as a memory operand (loading it again per user) nor
// merges it with the same load elsewhere and keeps it live. The x16 GEMVs
// are bound by their vector loads on Zen 3 (two per cycle; llvm-mca
// -mcpu=znver3) where GCC does either.
CHIMERA_T_X16A2_INLINE __m256i load_reg(const void* p) {
  __m256i v;
  __asm__("vmovdqu %1, %0" : "=x"(v) : "m"(*(const __m256i*)p));
  return v;
}

// *p (an f32 vector kept on the stack) loaded where it is used (asm), so
// that GCC does not hold it in a register across a whole block.
CHIMERA_T_X16A2_INLINE __m256 load_reg_ps(const __m256* p) {
  __m256 v;
  __asm__("vmovaps %1, %0" : "=x"(v) : "m"(*p));
  return v;
}

// bcast32 as an opaque register value (asm vpbroadcastd from memory): GCC
// otherwise may move the dword through a general register and the stack.
CHIMERA_T_X16A2_INLINE __m256i bcast32_reg(const void* p) {
  __m256i v;
  __asm__("vpbroadcastd %1, %0" : "=x"(v) : "m"(*(const int32_t*)p));
  return v;
}

// vpmaddwd(p, *m) with *m as its memory operand (asm): for word pairs kept on
// the stack, which GCC otherwise loads or recomputes into registers early
// and keeps live, spilling the sums instead.
CHIMERA_T_X16A2_INLINE __m256i madd_mem(__m256i p, const __m256i* m) {
  __m256i v;
  __asm__("vpmaddwd %2, %1, %0" : "=x"(v) : "x"(p), "m"(*m));
  return v;
}

// matmul_kquant.h's reduction of a tile's 8 f32 lane accumulators c[0..7]
// (one output row per 32-bit lane), in its fixed order.
CHIMERA_T_X16A2_INLINE __m256 lane_sum8(const __m256* c) {
  return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c[0], c[4]), _mm256_add_ps(c[2], c[6])),
                       _mm256_add_ps(_mm256_add_ps(c[1], c[5]), _mm256_add_ps(c[3], c[7])));
}

}  // namespace chimera::kernels::x16a2

#endif  // __x86_64__
