// AVX2 form of tq_pack_act8 (TqAct8, matmul_ternary.h), used by the AVX2 and
// AVX-512 ternary kernel entries: the same bytes as the scalar packer for
// every input (tested), per 256-element block exactly quantize_row_q8_K
// (quant/kquant_blocks.h):
//   amax = max |x_j| (vmaxps with the running maximum second: NaN skipped as
//          `ax > amax` skips it), max = the first x_j with |x_j| == amax,
//   iscale = -127 / max, q_j = min(127, nearest_int(iscale * x_j)) with the
//          same 1.5 * 2^23 bit trick, then the low byte (the (int8_t) cast),
//   corr_l = the sum of q over elements 32l..32l+31 (= bsums[2l] + bsums[2l+1]),
//   d = 1 / iscale; an all-zero (or all-NaN) block gives zeros.
// The scalar packer took ~2% of a BitNet prefill at m = 256.
#include "kernels/matmul_ternary.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#define CHIMERA_T_TQPACK __attribute__((target("avx2,fma,f16c,bmi")))

namespace chimera::kernels {
namespace {

namespace q = chimera::quant;

// 32 int32 (4 vectors) -> their low bytes, in order.
CHIMERA_T_TQPACK inline __m256i low_bytes(const __m256i* v) {
  const __m256i m = _mm256_set1_epi32(0xFF);
  const __m256i a = _mm256_packus_epi32(_mm256_and_si256(v[0], m), _mm256_and_si256(v[1], m));
  const __m256i b = _mm256_packus_epi32(_mm256_and_si256(v[2], m), _mm256_and_si256(v[3], m));
  return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(a, b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

CHIMERA_T_TQPACK void pack_block(const float* x, TqAct8& a) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < 32; ++j) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * j)), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  const float amax = _mm_cvtss_f32(h);
  if (amax == 0.f) {
    std::memset(a.qs, 0, sizeof(a.qs));
    std::memset(a.corr, 0, sizeof(a.corr));
    a.d = 0.f;
    return;
  }
  const __m256 va = _mm256_set1_ps(amax);
  float max = 0.f;
  for (int j = 0; j < 32; ++j) {
    const __m256 v = _mm256_loadu_ps(x + 8 * j);
    const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), va, _CMP_EQ_OQ));
    if (hit) {
      max = x[8 * j + __builtin_ctz((unsigned)hit)];
      break;
    }
  }
  const float iscale = -127.f / max;
  const __m256 vs = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(12582912.f);
  const __m256i mant = _mm256_set1_epi32(0x007fffff), off = _mm256_set1_epi32(0x00400000), top = _mm256_set1_epi32(127);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i sums[8];
  for (int c = 0; c < 8; ++c) {  // elements 32c..32c+31
    __m256i v[4];
    for (int j = 0; j < 4; ++j) {
      __m256 p = _mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * c + 8 * j));
      __asm__("" : "+x"(p));  // the product rounded first, as the scalar code (no FMA contraction)
      const __m256 f = _mm256_add_ps(p, magic);
      v[j] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), mant), off), top);
    }
    const __m256i q8 = low_bytes(v);
    // Plane order: elements 32n + i at 64n + i (n < 4), 128 + 32n + i at 64n + 32 + i.
    const int dst = c < 4 ? 64 * c : 64 * (c - 4) + 32;
    _mm256_storeu_si256((__m256i*)(a.qs + dst), q8);
    sums[c] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q8), ones16);
  }
  // corr_l = the sum of sums[l]'s 8 lanes (exact int32 sums of int8 values).
  const __m256i s03 = _mm256_hadd_epi32(_mm256_hadd_epi32(sums[0], sums[1]), _mm256_hadd_epi32(sums[2], sums[3]));
  const __m256i s47 = _mm256_hadd_epi32(_mm256_hadd_epi32(sums[4], sums[5]), _mm256_hadd_epi32(sums[6], sums[7]));
  const __m256i corr =
      _mm256_add_epi32(_mm256_permute2x128_si256(s03, s47, 0x20), _mm256_permute2x128_si256(s03, s47, 0x31));
  _mm256_storeu_si256((__m256i*)a.corr, corr);
  a.d = 1 / iscale;
}

}  // namespace

CHIMERA_T_TQPACK void tq_pack_act8_avx2(const float* x, int64_t k, void* out) {
  auto* o = static_cast<TqAct8*>(out);
  for (int64_t b = 0; b < k / q::kQK_K; ++b) pack_block(x + b * q::kQK_K, o[b]);
}

}  // namespace chimera::kernels

#endif
