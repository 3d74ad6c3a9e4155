// AVX2 Q6_K kernels over the x16 layout (matmul_kquant_x16.h): the AVX-512
// kernel (matmul_kquant_x16_q6_avx512.cpp) on 256-bit vectors. Each 64-byte
// chunk / plane of a group block is two halves (rows 0..7, rows 8..15), so a
// tile is 8 weight rows (one per 32-bit lane) x M <= 6 activation rows, and a
// group is two tiles.
//
// Arithmetic: llama.cpp's AVX2 vec_dot (3f545bec), kq_x16_dot_ref's Q6_K: per
// lane l (elements e with (e mod 32) / 4 == l) the exact int32
//   S_l = sum sc_{e/16} * q_e * a_e  -  32 * (sc_2l * bsum_2l + sc_2l+1 * bsum_2l+1)
// and acc_l = fma(dy * d, (float)S_l, acc_l), then matmul_kquant.h's reduction.
//  - levels: the three chunks of lane l give the four 4-element dwords of
//    quarters t = 0..3 (X_t & 63, and the top two bits of X0..X2 for t = 3);
//  - S_l += vpmaddubsw(level, broadcast activation dword) . (sc, sc): the
//    unsigned levels need no offset per element (int16 pairs |.| <= 2 * 63 *
//    128 = 16128, no saturation; |S_l| < 2^26);
//  - the offset: one vpmaddwd of the rows' (sc_2l, sc_2l+1) word pairs with
//    the activation block's (bsum_2l, bsum_2l+1), << 5, subtracted from S_l.
// Per 8 rows x 4 elements: vpmaddubsw, vpmaddwd, vpaddd (the storage kernels'
// order also needs a vpsubw of vpmaddubsw(32, a)), and no decoded panel for
// the GEMM.
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_kquant_x16_simd_avx2.h"
#include "kernels/matmul_tile.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using x16a2::bcast32;
using x16a2::loadu;

namespace q = chimera::quant;

constexpr size_t kAb = sizeof(q::block_q8_K);
constexpr size_t kAbsums = offsetof(q::block_q8_K, bsums);
constexpr size_t kQ6GroupBlock = kX16Rows * sizeof(q::block_q6_K);
constexpr size_t kQ6D = 0, kQ6Scales = 32, kQ6Levels = 288;
constexpr int kHalfRows = 8;
constexpr int kMaxActs = 6;

// vpshufb control (per 128-bit lane): dword i = bytes [zero, 4i + u, zero,
// 4i + u] -> two words (plane value u) << 8; vpsraw 8 sign-extends them.
CHIMERA_T_X16A2_INLINE __m256i pick_hi_bytes(int u) {
  const int ctl = 0x80 | (u << 8) | (0x80 << 16) | (u << 24);
  const __m128i v =
      _mm_add_epi32(_mm_set1_epi32(ctl), _mm_setr_epi32(0, 4 << 8 | 4 << 24, 8 << 8 | 8 << 24, 12 << 8 | 12 << 24));
  return _mm256_broadcastsi128_si256(v);
}

// The four levels (quarters t = 0..3) of lane l's three chunks X0..X2.
CHIMERA_T_X16A2_INLINE void levels4(const uint8_t* X, __m256i lv[4]) {
  const __m256i m6 = _mm256_set1_epi8(0x3F);
  const __m256i X0 = loadu(X), X1 = loadu(X + 64), X2 = loadu(X + 128);
  lv[0] = _mm256_and_si256(X0, m6);
  lv[1] = _mm256_and_si256(X1, m6);
  lv[2] = _mm256_and_si256(X2, m6);
  // level 3 = bits 6-7 of X0 | of X1 << 2 | of X2 << 4: the top bits T_t = X_t ^ (X_t & 63)
  // shifted as 16-bit words (nothing crosses a byte: the other bits are zero)
  const __m256i T0 = _mm256_xor_si256(X0, lv[0]), T1 = _mm256_xor_si256(X1, lv[1]), T2 = _mm256_xor_si256(X2, lv[2]);
  lv[3] = _mm256_srli_epi16(_mm256_or_si256(_mm256_or_si256(_mm256_srli_epi16(T0, 4), _mm256_srli_epi16(T1, 2)), T2), 2);
}

// One super-block of S 8-row tiles x M activation rows (Am[m]: row m's Q8_K
// block) into acc[s][m][0..7]; tile s is rows 8 * hs[s] .. + 7 (byte offset
// 32 * hs[s] in every chunk / plane) of group block Bs[s]. Per tile: the 16
// (sc_g, sc_g) word pairs of its rows on the stack (vpshufb + vpsraw from the
// scale planes; vpmaddwd memory operands); then lane by lane, S_l of the M
// activation rows over both 128-element halves h, each lane's levels built
// once for all M rows. Only the M sums, four levels and temporaries are live
// (M + ~7 of the 16 ymm), so the GEMM tile takes kMaxActs = 6 activation rows
// without spilling; the f32 lane accumulators stay on the stack (one load /
// fma / store per lane and super-block).
// The GEMM tiles are S = 1 (one half of a group, M <= 6). The decode GEMV
// (M = 1) runs both halves of each group (S = 2: the group's bytes are read
// once per super-block) and its multi-stream step kX16StreamsAvx2 groups
// (S = 2 * kX16StreamsAvx2): lane by lane, the lane's 6 chunk halves of
// every tile in turn, so the groups are interleaved by the two 3-line runs of
// one lane; pf != 0 fetches the same lines of the groups pf bytes further into
// L2 (gemv_prefetch.h). Each tile's arithmetic is the same for every S.
template <int S, int M>
CHIMERA_T_X16A2_INLINE void q6_block(const uint8_t* const (&Bs)[S], const int (&hs)[S], const uint8_t* const (&Am)[M],
                                     __m256 (&acc)[S][M][8], size_t pf) {
  alignas(32) __m256i V[S][16];
  __m256 dv[S][M];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const size_t ho = 32 * (size_t)hs[s];
    if (pf && hs[s] == 0) gemv_prefetch_l2(Bs[s] + pf, kQ6Levels);  // d and the scale planes
    CHIMERA_UNROLL for (int k = 0; k < 4; ++k) {
      const __m256i P = loadu(Bs[s] + kQ6Scales + 64 * k + ho);
      CHIMERA_UNROLL for (int u = 0; u < 4; ++u) {
        V[s][4 * k + u] = _mm256_srai_epi16(_mm256_shuffle_epi8(P, pick_hi_bytes(u)), 8);
      }
    }
    const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(Bs[s] + kQ6D + 16 * hs[s])));
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      float dy;
      std::memcpy(&dy, Am[m], 4);
      dv[s][m] = _mm256_mul_ps(_mm256_set1_ps(dy), d8);
    }
  }
  CHIMERA_UNROLL for (int lh = 0; lh < 2; ++lh) {
    CHIMERA_UNROLL for (int i = 0; i < 4; ++i) {
      const int l = 4 * lh + i;
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        const size_t ho = 32 * (size_t)hs[s];
        __m256i Sm[M];
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) Sm[m] = _mm256_setzero_si256();
        CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
          const uint8_t* X = Bs[s] + kQ6Levels + 64 * 3 * (size_t)(8 * lh + 4 * h + i);
          if (pf && hs[s] == 0) gemv_prefetch_l2(X + pf, 3 * 64);
          __m256i lv[4];
          levels4(X + ho, lv);
          CHIMERA_UNROLL for (int t = 0; t < 4; ++t) {
            const int e = 128 * h + 32 * t + 4 * l;
            const __m256i& Vg = V[s][8 * h + 2 * t + lh];
            CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
              const __m256i p = _mm256_maddubs_epi16(lv[t], bcast32(Am[m] + 4 + e));
              Sm[m] = _mm256_add_epi32(Sm[m], _mm256_madd_epi16(p, Vg));
              // GEMM tiles: keeps each sum a chain (GCC otherwise reassociates
              // the M x 8 products of a lane into trees and spills them).
              if constexpr (M > 1) __asm__("" : "+x"(Sm[m]));
            }
          }
        }
        // (sc_2l, sc_2l+1) . (bsum_2l, bsum_2l+1), times 32
        const __m256i W = _mm256_blend_epi16(V[s][2 * l], V[s][2 * l + 1], 0xAA);
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          const __m256i C = _mm256_madd_epi16(W, bcast32(Am[m] + kAbsums + 4 * l));
          const __m256i Sl = _mm256_sub_epi32(Sm[m], _mm256_slli_epi32(C, 5));
          acc[s][m][l] = _mm256_fmadd_ps(dv[s][m], _mm256_cvtepi32_ps(Sl), acc[s][m][l]);
        }
      }
    }
  }
}

// S 8-row tiles x M activation rows -> y[m * ldy + 8 s + 0..7]. S = 1: rows
// 8 * rh .. + 7 of the group at G; S > 1: both halves of S / 2 groups,
// gbytes apart (tile s = half s % 2 of group s / 2).
template <int S, int M>
CHIMERA_T_X16A2 void q6_run(const uint8_t* G, size_t gbytes, int rh, const uint8_t* a, size_t a_stride, int64_t nsb,
                            float* y, int64_t ldy, size_t pf) {
  static_assert(S == 1 || S % 2 == 0, "S > 1 runs whole groups");
  __m256 acc[S][M][8];
  int hs[S];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    hs[s] = S == 1 ? rh : s % 2;
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[s][m][l] = _mm256_setzero_ps();
    }
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + (size_t)(s / 2) * gbytes + (size_t)sb * kQ6GroupBlock;
    // the one-group GEMV: the near prefetch of its one stream (gemv_prefetch.h)
    if constexpr (S == 2 && M == 1) gemv_prefetch_ahead<kQ6GroupBlock, kPfX16>(Bs[0], G + (size_t)nsb * kQ6GroupBlock);
    const uint8_t* Am[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) Am[m] = a + (size_t)m * a_stride + (size_t)sb * kAb;
    q6_block<S, M>(Bs, hs, Am, acc, pf);
  }
  // matmul_kquant.h's reduction (no mins), lane (= row) for lane
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      const __m256* c = acc[s][m];
      const __m256 y8 = x16a2::lane_sum8(c);
      _mm256_storeu_ps(y + m * ldy + kHalfRows * s, y8);
    }
  }
}

// The 16 rows of a group: M = 1 both halves per super-block (the group is
// read once), M > 1 one half after the other (the second reads the group
// blocks again from L1 / L2).
template <int M>
void q6_tile16(const uint8_t* G, const uint8_t* A, size_t a_stride, int64_t nsb, float* y, int64_t ldy) {
  if constexpr (M == 1) {
    q6_run<2, 1>(G, 0, 0, A, a_stride, nsb, y, ldy, 0);
  } else {
    q6_run<1, M>(G, 0, 0, A, a_stride, nsb, y, ldy, 0);
    q6_run<1, M>(G, 0, 1, A, a_stride, nsb, y + kHalfRows, ldy, 0);
  }
}

// The decode GEMV's multi-stream step (kq_x16_run).
void q6_gemv(const uint8_t* G, size_t gbytes, const uint8_t* a, int64_t nsb, float* y, size_t pf) {
  q6_run<2 * kX16StreamsAvx2, 1>(G, gbytes, 0, a, 0, nsb, y, 0, pf);
}

}  // namespace

GemmFn kq_x16_q6_gemm_avx2() {
  static constexpr KqX16TileFn kTiles[kMaxActs] = {q6_tile16<1>, q6_tile16<2>, q6_tile16<3>,
                                                   q6_tile16<4>, q6_tile16<5>, q6_tile16<6>};
  return [](const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
    kq_x16_run<kX16StreamsAvx2>(kTiles, g, r0, r1, i0, i1, q6_gemv);
  };
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_q6_gemm_avx2() { return nullptr; }
}  // namespace chimera::kernels

#endif
