// AVX-512 Q6_K kernels over the x16 layout (matmul_kquant_x16.h): GEMV and
// GEMM in tiles of 16 weight rows (one per 32-bit lane) x M <= 4 activation
// rows, straight from the packed bytes. Bit-identical to kq_x16_dot_ref
// (llama.cpp's current AVX2 Q6_K order: the level offset from the
// activations' bsums, per f32 lane).
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_kquant_x16_simd.h"
#include "kernels/matmul_tile.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;
using x16::bcast32;
using x16::dpwssd;

// vpshufb control: in every 128-bit lane, dword i = bytes [zero, 4i + u,
// zero, 4i + u] -> two 16-bit words (plane value u) << 8; vpsraw 8 then
// sign-extends (Q6_K scales are int8).
CHIMERA_T_X16_INLINE __m512i pick_hi_bytes(int u) {
  const int ctl = 0x80 | (u << 8) | (0x80 << 16) | (u << 24);
  constexpr int s4 = 4 << 8 | 4 << 24, s8 = 8 << 8 | 8 << 24, s12 = 12 << 8 | 12 << 24;
  return _mm512_add_epi32(_mm512_set1_epi32(ctl),
                          _mm512_set_epi32(s12, s8, s4, 0, s12, s8, s4, 0, s12, s8, s4, 0, s12, s8, s4, 0));
}

constexpr size_t kQ6GroupBlock = kX16Rows * sizeof(q::block_q6_K);
constexpr size_t kQ6D = 0, kQ6Scales = 32, kQ6Levels = 288;

// Q6_K, per super-block of a 16-row group (layout in matmul_kquant_x16.h), in
// llama.cpp's AVX2 order (kq_x16_dot_ref, the AVX2 kernel's comment):
//   scales: the 16 (sc_g, sc_g) word pairs of the rows (vpshufb + vpsraw from
//     the scale planes), on the stack.
//   levels: the three chunks of lane l give the four 4-element dwords (t =
//     0..3) of lane l: X_t & 63, and the top 2 bits of X0..X2 for t = 3.
//   sums: S_l += vpmaddubsw(level, broadcast activation dword) . (sc, sc)
//     (vpdpwssd / vpmaddwd + vpaddd; int16 pairs |.| <= 2 * 63 * 128), then
//     S_l -= 32 * ((sc_2l, sc_2l+1) . (bsum_2l, bsum_2l+1)) (the level offset
//     from the activation block's bsums) and acc_l = fma(dy * d, (float)S_l,
//     acc_l), then matmul_kquant.h's reduction.
// The lanes of one half (l < 4: even groups, l >= 4: odd groups) are done
// together so that only 4 S_l per activation row are live at a time; the
// group block is read front to back (its layout follows this order).
// M activation rows share each weight load and level build; the decode GEMV
// runs kX16Streams groups at once (gemv_prefetch.h). Every output keeps the
// same integer sums and f32 order.
// One super-block of S groups (group block Bs[s]) x M activation rows (Am[m]:
// row m's Q8_K block) into acc[s][m][0..7]. S > 1 (with M = 1) is the decode
// GEMV's multi-stream step (kq_x16_run): the groups are interleaved chunk by
// chunk, and pf != 0 fetches the same chunks of the groups pf bytes further
// into L2 (gemv_prefetch.h). Each group's arithmetic is the same for every S.
template <bool kVnni, int S, int M>
CHIMERA_T_X16_INLINE void q6_block(const uint8_t* const* Bs, const uint8_t* const* Am, __m512 (&acc)[S][M][8],
                                   size_t pf) {
  constexpr size_t kAbsums = offsetof(q::block_q8_K, bsums);
  const __m512i m6 = _mm512_set1_epi8(0x3F);
  const __m512i top2 = _mm512_set1_epi8((char)0xC0);
  const __m512i hi4 = _mm512_set1_epi8((char)0xF0);
  alignas(64) __m512i V[S][16];
  __m512 dv[S][M];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    if (pf) gemv_prefetch_l2(Bs[s] + pf, kQ6Levels);  // d and the scale planes
    CHIMERA_UNROLL for (int k = 0; k < 4; ++k) {
      const __m512i P = _mm512_loadu_si512(Bs[s] + kQ6Scales + 64 * k);
      CHIMERA_UNROLL for (int u = 0; u < 4; ++u) {
        V[s][4 * k + u] = _mm512_srai_epi16(_mm512_shuffle_epi8(P, pick_hi_bytes(u)), 8);
      }
    }
    const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(Bs[s] + kQ6D)));
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      float dy;
      std::memcpy(&dy, Am[m], 4);
      dv[s][m] = _mm512_mul_ps(_mm512_set1_ps(dy), d16);
    }
  }
  CHIMERA_UNROLL for (int half = 0; half < 2; ++half) {
    __m512i Sx[S][M][4];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        CHIMERA_UNROLL for (int i = 0; i < 4; ++i) Sx[s][m][i] = _mm512_setzero_si512();
      }
    }
    CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
      CHIMERA_UNROLL for (int i = 0; i < 4; ++i) {
        const int l = 4 * half + i;
        CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
          const uint8_t* X = Bs[s] + kQ6Levels + 64 * 3 * (size_t)(8 * half + 4 * h + i);
          if (pf) gemv_prefetch_l2(X + pf, 3 * 64);
          const __m512i X0 = _mm512_loadu_si512(X), X1 = _mm512_loadu_si512(X + 64), X2 = _mm512_loadu_si512(X + 128);
          __m512i lv[4];
          lv[0] = _mm512_and_si512(X0, m6);
          lv[1] = _mm512_and_si512(X1, m6);
          lv[2] = _mm512_and_si512(X2, m6);
          // 0xD8: c ? b : a (the dead shifted operand first: no register copy).
          // Bits 6-7 of X2, 4-5 of X1 (>> 2), 2-3 of X0 (>> 4).
          const __m512i w = _mm512_ternarylogic_epi32(_mm512_srli_epi16(X1, 2), X2, top2, 0xD8);
          const __m512i w2 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(X0, 4), w, hi4, 0xD8);
          lv[3] = _mm512_and_si512(_mm512_srli_epi16(w2, 2), m6);
          CHIMERA_UNROLL for (int t = 0; t < 4; ++t) {
            const int e = 128 * h + 32 * t + 4 * l;
            const __m512i& Vg = V[s][8 * h + 2 * t + half];
            CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
              Sx[s][m][i] = dpwssd<kVnni>(Sx[s][m][i], _mm512_maddubs_epi16(lv[t], bcast32(Am[m] + 4 + e)), Vg);
            }
          }
        }
      }
    }
    CHIMERA_UNROLL for (int i = 0; i < 4; ++i) {
      const int l = 4 * half + i;
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        const __m512i W = _mm512_mask_blend_epi16(0xAAAAAAAAu, V[s][2 * l], V[s][2 * l + 1]);
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          const __m512i C = _mm512_madd_epi16(W, bcast32(Am[m] + kAbsums + 4 * l));
          const __m512i Sl = _mm512_sub_epi32(Sx[s][m][i], _mm512_slli_epi32(C, 5));
          acc[s][m][l] = _mm512_fmadd_ps(dv[s][m], _mm512_cvtepi32_ps(Sl), acc[s][m][l]);
        }
      }
    }
  }
}

// S groups (gbytes apart) x M activation rows -> y[m * ldy + 16 s + 0..15]:
// the GEMM tiles (S = 1) and the decode GEMV's multi-stream step (M = 1).
template <bool kVnni, int S, int M>
CHIMERA_T_X16 void q6_run(const uint8_t* G, size_t gbytes, const uint8_t* a, size_t a_stride, int64_t nsb, float* y,
                          int64_t ldy, size_t pf) {
  constexpr size_t kAb = sizeof(q::block_q8_K);
  __m512 acc[S][M][8];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[s][m][l] = _mm512_setzero_ps();
    }
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + s * gbytes + (size_t)sb * kQ6GroupBlock;
    if constexpr (S == 1 && M == 1) gemv_prefetch_ahead<kQ6GroupBlock, kPfX16>(Bs[0], G + (size_t)nsb * kQ6GroupBlock);
    const uint8_t* Am[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) Am[m] = a + (size_t)m * a_stride + (size_t)sb * kAb;
    q6_block<kVnni, S, M>(Bs, Am, acc, pf);
  }
  // matmul_kquant.h's reduction (no mins), lane (= row) for lane
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      const __m512* c = acc[s][m];
      const __m512 y8 = x16::lane_sum8(c);
      _mm512_storeu_ps(y + m * ldy + kX16Rows * s, y8);
    }
  }
}

template <bool kVnni, int M>
CHIMERA_T_X16 void q6_tile(const uint8_t* G, const uint8_t* a, size_t a_stride, int64_t nsb, float* y, int64_t ldy) {
  q6_run<kVnni, 1, M>(G, 0, a, a_stride, nsb, y, ldy, 0);
}

template <bool kVnni>
CHIMERA_T_X16 void q6_gemv(const uint8_t* G, size_t gbytes, const uint8_t* a, int64_t nsb, float* y, size_t pf) {
  q6_run<kVnni, kX16Streams, 1>(G, gbytes, a, 0, nsb, y, 0, pf);
}

constexpr int kQ6Acts = 4;

template <bool kVnni>
void q6_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr KqX16TileFn kTiles[kQ6Acts] = {q6_tile<kVnni, 1>, q6_tile<kVnni, 2>, q6_tile<kVnni, 3>,
                                                  q6_tile<kVnni, 4>};
  kq_x16_run(kTiles, g, r0, r1, i0, i1, q6_gemv<kVnni>);
}

}  // namespace

GemmFn kq_x16_q6_gemm_avx512(bool vnni) { return vnni ? q6_gemm<true> : q6_gemm<false>; }

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_q6_gemm_avx512(bool) { return nullptr; }
}  // namespace chimera::kernels

#endif
