// AVX2 pieces of the exact Q8_K activation quantizer (quant::quantize_row_q8_K,
// ggml's x86 one), shared by the K-quant / IQ4_XS activation packer
// (q8k_pack_avx2.cpp) and the ternary TqAct8 packer
// (matmul_ternary_pack_avx2.cpp). Per 256-element block, as the scalar code:
//   amax = max |x_j| (vmaxps with the running maximum second: a NaN is
//          skipped as `ax > amax` skips it), max = the first x_j with
//          |x_j| == amax (its sign matters),
//   iscale = -127 / max, q_j = min(127, nearest_int(iscale * x_j)) with the
//          same 1.5 * 2^23 bit trick on the rounded product (no FMA), then the
//          low byte (the (int8_t) cast; NaN and inf inputs give the scalar
//          code's bytes too),
//   d = 1 / iscale; amax == 0 (all zeros or NaNs) is the caller's zero block.
// Include only from translation units compiled for x86-64.
#pragma once

#include <immintrin.h>

#define CHIMERA_T_Q8K_AVX2 __attribute__((target("avx2,fma,f16c,bmi")))

namespace chimera::kernels::q8k_avx2 {

// The block's scale: false when amax == 0 (a zero block), else true with
// iscale = -127 / max (-0.0 when max is infinite: the scalar code goes on too).
CHIMERA_T_Q8K_AVX2 inline bool block_iscale(const float* x, float& iscale) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < 32; ++j) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  const float amax = _mm_cvtss_f32(h);
  if (amax == 0.f) return false;
  const __m256 va = _mm256_set1_ps(amax);
  for (int j = 0; j < 32; ++j) {
    const __m256 v = _mm256_loadu_ps(x + 8 * j);
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), va, _CMP_EQ_OQ));
    if (hit) {
      iscale = -127.f / x[8 * j + __builtin_ctz((unsigned)hit)];
      return true;
    }
  }
  return false;  // not reached: some |x_j| equals amax
}

// 32 int32 (4 vectors) -> their low bytes, in order.
CHIMERA_T_Q8K_AVX2 inline __m256i low_bytes(const __m256i (&v)[4]) {
  const __m256i m = _mm256_set1_epi32(0xFF);
  const __m256i a = _mm256_packus_epi32(_mm256_and_si256(v[0], m), _mm256_and_si256(v[1], m));
  const __m256i b = _mm256_packus_epi32(_mm256_and_si256(v[2], m), _mm256_and_si256(v[3], m));
  return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// q_j of the 32 elements x[0..31] (vs = iscale in every lane), in order.
CHIMERA_T_Q8K_AVX2 inline __m256i quantize32(const float* x, __m256 vs) {
  const __m256 magic = _mm256_set1_ps(12582912.f);
  const __m256i mant = _mm256_set1_epi32(0x007fffff), off = _mm256_set1_epi32(0x00400000), top = _mm256_set1_epi32(127);
  __m256i v[4];
  for (int j = 0; j < 4; ++j) {
    __m256 p = _mm256_mul_ps(vs, _mm256_loadu_ps(x + 8 * j));
    __asm__("" : "+x"(p));  // the product rounded first, as the scalar code (no FMA contraction)
    const __m256 f = _mm256_add_ps(p, magic);
    v[j] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), mant), off), top);
  }
  return low_bytes(v);
}

// The 8 int32 lane sums of 32 int8 q: lanes 0-3 hold elements 0-15 (4 each),
// lanes 4-7 elements 16-31 (exact).
CHIMERA_T_Q8K_AVX2 inline __m256i sum4(__m256i q8) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8), _mm256_set1_epi16(1));
}

}  // namespace chimera::kernels::q8k_avx2
