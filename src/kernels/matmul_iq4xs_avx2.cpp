// IQ4_XS x Q8_K matmul, Isa::kAvx2 (also used at Isa::kAvx512 when that level
// has no kernel of its own). Per pair of 32-element sub-blocks the 4-bit
// indices are split into low/high nibbles and looked up in the 16-entry
// codebook with vpshufb (low nibbles = elements 0..15 of a sub-block in the
// low 128-bit lane, high nibbles = 16..31 in the high lane); then
// vpmaddubsw(|w|, sign(a, w)) (|pair| <= 2*127*127 < 2^15, no saturation) and
// vpmaddwd by the sub-block scale (ls - 32) give int32 lane l = the exact sum
// over the elements with (e mod 32) / 4 == l. Tiles of 1 weight row x up to 4
// activation rows decode each weight sub-block once per tile. f32 steps and
// tolerance: matmul_iq4xs.h (bit-identical to the scalar kernel).
#include "kernels/matmul_iq4xs.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>

#include "core/fp16.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_kquant_x16.h"
#include "quant/legacy_blocks.h"

#define CHIMERA_T_IQ4AVX2 __attribute__((target("avx2,fma,f16c")))

namespace chimera::kernels::iq4xs {
namespace {

using format::GgmlType;
using quant::block_iq4_xs;
using quant::block_q8_K;

// One weight row x M activation rows (M <= 4).
template <int M>
CHIMERA_T_IQ4AVX2 void tile(const block_iq4_xs* w, const GemmArgs& g, int64_t nsb, int64_t r, int64_t i) {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4nlValues));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const block_q8_K* a[M];
  for (int t = 0; t < M; ++t) a[t] = reinterpret_cast<const block_q8_K*>(g.a + (size_t)(i + t) * g.a_stride);
  __m256 acc[M];
  for (int t = 0; t < M; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nsb; ++b) {
    if constexpr (M == 1) {  // GEMV: prefetch the next row's block into L2
      const uint8_t* pf = reinterpret_cast<const uint8_t*>(w + b) + g.w_stride;
      for (int o = 0; o < (int)sizeof(block_iq4_xs); o += 64) __builtin_prefetch(pf + o, 0, 2);
    }
    const uint8_t* qs = w[b].qs;
    __m256i sumi[M];
    for (int t = 0; t < M; ++t) sumi[t] = _mm256_setzero_si256();
    uint32_t sh = w[b].scales_h;
    for (int j = 0; j < 8; j += 2, qs += 32) {
      const __m128i bits1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
      const __m128i bits2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16));
      const __m256i w1 = _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(bits1, 4), m4)),
                                          _mm_shuffle_epi8(values, _mm_and_si128(bits1, m4)));
      const __m256i w2 = _mm256_set_m128i(_mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(bits2, 4), m4)),
                                          _mm_shuffle_epi8(values, _mm_and_si128(bits2, m4)));
      const __m256i aw1 = _mm256_sign_epi8(w1, w1), aw2 = _mm256_sign_epi8(w2, w2);
      const uint8_t sl = w[b].scales_l[j / 2];
      const __m256i ls1 = _mm256_set1_epi16((int16_t)(((sl & 0xF) | ((sh << 4) & 0x30)) - 32));
      const __m256i ls2 = _mm256_set1_epi16((int16_t)(((sl >> 4) | ((sh << 2) & 0x30)) - 32));
      sh >>= 4;
      for (int t = 0; t < M; ++t) {
        const int8_t* q8 = a[t][b].qs + 32 * j;
        const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8));
        const __m256i a2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32));
        const __m256i p1 = _mm256_maddubs_epi16(aw1, _mm256_sign_epi8(a1, w1));
        const __m256i p2 = _mm256_maddubs_epi16(aw2, _mm256_sign_epi8(a2, w2));
        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_madd_epi16(p1, ls1), _mm256_madd_epi16(p2, ls2)));
      }
    }
    const float dw = f16_to_f32(w[b].d);
    for (int t = 0; t < M; ++t)
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[t][b].d), _mm256_cvtepi32_ps(sumi[t]), acc[t]);
  }
  for (int t = 0; t < M; ++t) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[t]);
    g.y[(i + t) * g.ldy + r] = finish8(lanes);
  }
}

CHIMERA_T_IQ4AVX2 void gemm_avx2(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nsb = g.k / quant::kQK_K;
  const int64_t ib_rows = act_block_rows(g.a_stride, 4);
  for (int64_t ib = i0; ib < i1; ib += ib_rows) {
    const int64_t ie = std::min(i1, ib + ib_rows);
    for (int64_t r = r0; r < r1; ++r) {
      const auto* w = reinterpret_cast<const block_iq4_xs*>(g.w + (size_t)r * g.w_stride);
      int64_t i = ib;
      for (; i + 4 <= ie; i += 4) tile<4>(w, g, nsb, r, i);
      switch (ie - i) {
        case 3: tile<3>(w, g, nsb, r, i); break;
        case 2: tile<2>(w, g, nsb, r, i); break;
        case 1: tile<1>(w, g, nsb, r, i); break;
        default: break;
      }
    }
  }
}

}  // namespace

// Rows in groups of 16 are repacked at load into the x16 layout
// (matmul_kquant_x16.h; kernel in matmul_iq4xs_x16_avx2.cpp, same bits).
MatmulKernel kernel_avx2(GgmlType type) {
  if (type != GgmlType::IQ4_XS) return {};
  MatmulKernel k{kq_pack_act_avx2, kq_act_bytes, gemm_avx2, "gemm_iq4_xs_q8_K_avx2", GgmlType::Q8_K};
  kq_x16_set_repack(type, kq_x16_gemm_avx2(type), k);
  return k;
}

}  // namespace chimera::kernels::iq4xs

#else  // !__x86_64__

namespace chimera::kernels::iq4xs {
MatmulKernel kernel_avx2(format::GgmlType) { return {}; }
}  // namespace chimera::kernels::iq4xs

#endif
