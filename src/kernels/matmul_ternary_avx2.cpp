// AVX2 ternary matmul kernels (Isa::kAvx2): TQ1_0 / TQ2_0 weights x Q8_K
// activations. Layout: each weight row is decoded once per call into trits
// (matmul_ternary.h; TQ2_0 with a shift/mask SIMD decoder, TQ1_0 with the
// shared scalar one) and dotted with every activation row. Per super-block:
// 8 chunks of 32 elements, vpmaddubsw(trits u8 0..2, activations s8) -> int16
// pairs (|.| <= 2*2*128, no saturation), vpmaddwd by 1 -> int32 lane l holding
// elements with (e mod 32) / 4 == l, minus vpmaddwd(bsums, 1) (the trit offset,
// llama.cpp's way). Precision: exact int32 lanes, then vfmadd into 8 f32 lanes
// and the fixed reduction of matmul_ternary.h — bit-identical to Isa::kScalar.
#include "kernels/matmul_ternary.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_kquant.h"

#define CHIMERA_T_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

CHIMERA_T_AVX2 float tq2_0_decode_avx2(const uint8_t* blk, TqDecoded* out) {
  const __m256i mask = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    const __m256i x = _mm256_loadu_si256((const __m256i*)(blk + 32 * h));
    for (int n = 0; n < 4; ++n) {
      const __m256i t = _mm256_and_si256(_mm256_srli_epi16(x, 2 * n), mask);
      _mm256_store_si256((__m256i*)(out->t + 128 * h + 32 * n), t);
    }
  }
  uint16_t d;
  std::memcpy(&d, blk + 64, 2);
  return _cvtsh_ss(d);
}

CHIMERA_T_AVX2 float dot_avx2(const TqDecoded* w, const float* wd, const uint8_t* act, int64_t nsb) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* y = act + (size_t)sb * sizeof(q::block_q8_K);
    const int8_t* qs = (const int8_t*)(y + 4);
    __m256i s = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i t = _mm256_load_si256((const __m256i*)(w[sb].t + 32 * c));
      const __m256i a = _mm256_loadu_si256((const __m256i*)(qs + 32 * c));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(t, a), ones));
    }
    const __m256i bs = _mm256_loadu_si256((const __m256i*)(y + 260));
    s = _mm256_sub_epi32(s, _mm256_madd_epi16(bs, ones));
    float dy;
    std::memcpy(&dy, y, 4);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * wd[sb]), _mm256_cvtepi32_ps(s), acc);
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  return detail::tq_finish(l);
}

}  // namespace

MatmulKernel ternary_kernel_avx2(format::GgmlType type) {
  switch (type) {
    case GgmlType::TQ1_0:
      return {kq_pack_act, kq_act_bytes, detail::tq_gemm<tq1_0_decode, sizeof(q::block_tq1_0), dot_avx2>,
              "gemm_tq1_0_q8_K_avx2", GgmlType::Q8_K};
    case GgmlType::TQ2_0:
      return {kq_pack_act, kq_act_bytes, detail::tq_gemm<tq2_0_decode_avx2, sizeof(q::block_tq2_0), dot_avx2>,
              "gemm_tq2_0_q8_K_avx2", GgmlType::Q8_K};
    default: return {};
  }
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel ternary_kernel_avx2(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
