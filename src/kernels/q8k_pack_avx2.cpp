// AVX2 form of kq_pack_act (quant::quantize_row_q8_K into block_q8_K), the
// activation packer of the AVX2 and AVX-512 K-quant, IQ4_XS and TQ1_0 kernels:
// the same bytes as the scalar quantizer for every input (tested on every ISA,
// with NaN, inf, -0.0, denormal and tied maxima), from the steps shared with the
// ternary packer (q8k_avx2.h); bsums[g] = the sum of q over elements
// 16g..16g+15. The scalar quantizer was ~4.5 % of an 8-stream Phi-tiny-MoE
// decode step (every GEMM input of a step is packed, ~0.5 M values).
#include "kernels/matmul_kquant.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/q8k_avx2.h"

namespace chimera::kernels {
namespace {

namespace q = chimera::quant;

// The 16 int16 bsums of 4 chunks' sum4 vectors s[0..3] (chunk c = elements
// 32c..32c+31): [c0 lo, c0 hi, c1 lo, c1 hi, ...] as 8 int32.
CHIMERA_T_Q8K_AVX2 inline __m256i half_sums(const __m256i* s) {
  // hadd twice: [c0 lo, c1 lo, c2 lo, c3 lo | c0 hi, c1 hi, c2 hi, c3 hi]
  const __m256i t = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
  return _mm256_permutevar8x32_epi32(t, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

CHIMERA_T_Q8K_AVX2 void quantize_block(const float* x, q::block_q8_K& y) {
  float iscale;
  if (!q8k_avx2::block_iscale(x, iscale)) {
    y.d = 0;
    std::memset(y.qs, 0, sizeof(y.qs));
    std::memset(y.bsums, 0, sizeof(y.bsums));
    return;
  }
  const __m256 vs = _mm256_set1_ps(iscale);
  __m256i sums[8];
  for (int c = 0; c < 8; ++c) {
    const __m256i q8 = q8k_avx2::quantize32(x + 32 * c, vs);
    _mm256_storeu_si256((__m256i*)(y.qs + 32 * c), q8);
    sums[c] = q8k_avx2::sum4(q8);
  }
  // |bsum| <= 16 * 128: the saturating pack is exact; permute4x64 undoes its lane split.
  const __m256i b = _mm256_packs_epi32(half_sums(sums), half_sums(sums + 4));
  _mm256_storeu_si256((__m256i*)y.bsums, _mm256_permute4x64_epi64(b, 0xD8));
  y.d = 1 / iscale;
}

}  // namespace

CHIMERA_T_Q8K_AVX2 void kq_pack_act_avx2(const float* x, int64_t k, void* out) {
  auto* y = static_cast<q::block_q8_K*>(out);
  for (int64_t b = 0; b < k / q::kQK_K; ++b) quantize_block(x + b * q::kQK_K, y[b]);
}

}  // namespace chimera::kernels

#endif
