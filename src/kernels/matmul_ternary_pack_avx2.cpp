// AVX2 form of tq_pack_act8 (TqAct8, matmul_ternary.h), used by the AVX2 and
// AVX-512 ternary kernel entries: the same bytes as the scalar packer for
// every input (tested), per 256-element block exactly quantize_row_q8_K
// (the shared steps in q8k_avx2.h), permuted into TqAct8's planes, with
//   corr_l = the sum of q over elements 32l..32l+31 (= bsums[2l] + bsums[2l+1]);
// an all-zero (or all-NaN) block gives zeros.
// The scalar packer took ~2% of a BitNet prefill at m = 256.
#include "kernels/matmul_ternary.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/q8k_avx2.h"

namespace chimera::kernels {
namespace {

namespace q = chimera::quant;

CHIMERA_T_Q8K_AVX2 void pack_block(const float* x, TqAct8& a) {
  float iscale;
  if (!q8k_avx2::block_iscale(x, iscale)) {
    std::memset(a.qs, 0, sizeof(a.qs));
    std::memset(a.corr, 0, sizeof(a.corr));
    a.d = 0.f;
    return;
  }
  const __m256 vs = _mm256_set1_ps(iscale);
  __m256i sums[8];
  for (int c = 0; c < 8; ++c) {  // elements 32c..32c+31
    const __m256i q8 = q8k_avx2::quantize32(x + 32 * c, vs);
    // Plane order: elements 32n + i at 64n + i (n < 4), 128 + 32n + i at 64n + 32 + i.
    const int dst = c < 4 ? 64 * c : 64 * (c - 4) + 32;
    _mm256_storeu_si256((__m256i*)(a.qs + dst), q8);
    sums[c] = q8k_avx2::sum4(q8);
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

CHIMERA_T_Q8K_AVX2 void tq_pack_act8_avx2(const float* x, int64_t k, void* out) {
  auto* o = static_cast<TqAct8*>(out);
  for (int64_t b = 0; b < k / q::kQK_K; ++b) pack_block(x + b * q::kQK_K, o[b]);
}

}  // namespace chimera::kernels

#endif
