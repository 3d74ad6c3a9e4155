// AVX2 Q6_K kernels over the x16 layout (matmul_kquant_x16.h): the AVX-512
// kernel (matmul_kquant_x16_q6_avx512.cpp) on 256-bit vectors. Each 64-byte
// chunk / plane of a group block is two halves (rows 0..7, rows 8..15), so a
// tile is 8 weight rows (one per 32-bit lane) x M <= kMaxActs activation
// rows, and a group is two tiles.
//
// Arithmetic: the x16 Q6_K order (kq_x16_dot_ref; bit-identical): per
// super-block the exact int32
//   S = sum_g sc_g * (sum_{e in group g} q_e * a_e) - 32 * sum_g sc_g * bsum_g
// and acc = fma(dy * d, (float)S, acc).
//  - levels: the three chunks of scale group g give its four 4-element dwords
//    (X_c & 63, and the top two bits of X0..X2 for dword 3), built once for
//    all M rows;
//  - per row: vpmaddubsw of each level dword with the broadcast activation
//    dword (int16 pairs |.| <= 2 * 63 * 128), two of them added in int16
//    (|.| <= 32256, exact), and each of the two sums times the (sc_g, sc_g)
//    word pair by vpmaddwd into S: 4 vpmaddubsw, 2 vpaddw, 2 vpmaddwd, 2 vpaddd
//    per 16 elements x 8 rows (llama.cpp's per-lane order: 4 + 4 + 4);
//  - the level offset: S starts at -32 * sum_l (sc_2l, sc_2l+1) . (bsum_2l,
//    bsum_2l+1) (8 vpmaddwd per row and super-block).
// One int32 sum and one f32 accumulator per activation row (the per-lane
// order had 8 f32 lanes and its epilogue per row).
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
using x16a2::bcast32_reg;
using x16a2::load_reg;
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

// The four level dwords of a scale group from its chunk halves X0..X2 (X, X + 64, X + 128).
CHIMERA_T_X16A2_INLINE void levels4(const uint8_t* X, __m256i lv[4]) {
  const __m256i m6 = _mm256_set1_epi8(0x3F);
  const __m256i X0 = load_reg(X), X1 = load_reg(X + 64), X2 = load_reg(X + 128);
  lv[0] = _mm256_and_si256(X0, m6);
  lv[1] = _mm256_and_si256(X1, m6);
  lv[2] = _mm256_and_si256(X2, m6);
  // dword 3 = bits 6-7 of X0 | of X1 << 2 | of X2 << 4: the top bits T_c = X_c ^ (X_c & 63)
  // shifted as 16-bit words (nothing crosses a byte: the other bits are zero)
  const __m256i T0 = _mm256_xor_si256(X0, lv[0]), T1 = _mm256_xor_si256(X1, lv[1]), T2 = _mm256_xor_si256(X2, lv[2]);
  lv[3] = _mm256_srli_epi16(_mm256_or_si256(_mm256_or_si256(_mm256_srli_epi16(T0, 4), _mm256_srli_epi16(T1, 2)), T2), 2);
}

// The decode GEMV's prefetch policy (gemv_prefetch.h): the AVX-VNNI level
// fetches each group's next super-block into L1 (near); plain AVX2, whose
// loop is compute-bound here (L2-resident weights ~32 GB/s on one Zen 5
// core, about what DRAM gives it), keeps the far L2 prefetch: near measured
// 0.88-1.06x of it, against 1.05-1.21x at the VNNI level.
template <bool kVnni>
constexpr bool kNearPf = kVnni;

// Scale group g's four level dwords of the 8-row tile hs (0, 1) of group block
// B; pf != 0 (the decode GEMV): also the group's 3 chunks pf bytes further
// (gemv_step_prefetch), once per group (by tile 0).
template <bool kNear>
CHIMERA_T_X16A2_INLINE void group_levels(const uint8_t* B, int hs, int g, size_t pf, __m256i lv[4]) {
  const uint8_t* X = B + kQ6Levels + 3 * 64 * (size_t)g;
  if (pf && hs == 0) gemv_step_prefetch<kNear>(X + pf, 3 * 64);
  levels4(X + 32 * (size_t)hs, lv);
}

// AVX-VNNI (Isa::kAvx2Vnni): s += u8 . s8 (4 byte products per int32 lane),
// the VEX vpdpbusd by inline asm so the plain AVX2 instantiations never use it.
CHIMERA_T_X16A2_INLINE __m256i dpbusd(__m256i s, __m256i u8, __m256i s8) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(s) : "x"(u8), "x"(s8));
  return s;
}

// One super-block of S 8-row tiles x M activation rows (Am[m]: row m's Q8_K
// block) into acc[s][m]; tile s is rows 8 * hs[s] .. + 7 (byte offset
// 32 * hs[s] in every chunk / plane) of group block Bs[s]. Per tile: the 16
// (sc_g, sc_g) word pairs of its rows on the stack (vpshufb + vpsraw from the
// scale planes; vpmaddwd memory operands) and the offsets; then group by
// group, each group's levels built once for all M rows. Live: the M sums,
// four levels and temporaries (M + ~7 of the 16 ymm).
// The GEMM tiles are S = 1 (one half of a group). The decode GEMV (M = 1)
// runs both halves of each group (S = 2: the group's bytes are read once per
// super-block) and its multi-stream step kX16StreamsAvx2 groups (S = 2 *
// kX16StreamsAvx2): group by group, the scale group's 3 chunk halves of
// every tile in turn; pf != 0 fetches the same lines of the groups pf bytes
// further (kNearPf's policy, gemv_prefetch.h). Each tile's arithmetic is the same for
// every S and M.
template <bool kVnni, int S, int M>
CHIMERA_T_X16A2_INLINE void q6_block(const uint8_t* const (&Bs)[S], const int (&hs)[S], const uint8_t* const (&Am)[M],
                                     __m256 (&acc)[S][M], size_t pf) {
  __m256i Sx[S][M];
  if constexpr (kVnni) {
    // P_g = -32 * bsum_g + the group's 16 products (4 vpdpbusd; |P| < 2^18),
    // then S += P_g * sc_g (vpmulld with the scale sign-extended per lane)
    alignas(32) int32_t off[M][16];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      CHIMERA_UNROLL for (int j = 0; j < 2; ++j) {
        const __m256i b = _mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i*)(Am[m] + kAbsums + 16 * j)));
        _mm256_store_si256((__m256i*)(off[m] + 8 * j), _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(b, 5)));
      }
    }
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      if (pf && hs[s] == 0) gemv_step_prefetch<kNearPf<kVnni>>(Bs[s] + pf, kQ6Levels);  // d and the scale planes
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) Sx[s][m] = _mm256_setzero_si256();
    }
    CHIMERA_UNROLL for (int g = 0; g < 16; ++g) {
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        __m256i lv[4];
        group_levels<kNearPf<kVnni>>(Bs[s], hs[s], g, pf, lv);
        const __m256i P8 = loadu(Bs[s] + kQ6Scales + 64 * (g / 4) + 32 * (size_t)hs[s]);
        const __m256i sc = _mm256_srai_epi32(g % 4 == 3 ? P8 : _mm256_slli_epi32(P8, 24 - 8 * (g % 4)), 24);
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          const uint8_t* a = Am[m] + 4 + 16 * g;
          __m256i P = bcast32_reg(&off[m][g]);  // asm: the table stays in memory
          CHIMERA_UNROLL for (int c = 0; c < 4; ++c) P = dpbusd(P, lv[c], bcast32(a + 4 * c));
          Sx[s][m] = _mm256_add_epi32(Sx[s][m], _mm256_mullo_epi32(P, sc));
          __asm__("" : "+x"(Sx[s][m]));  // a chain per row (see below)
        }
      }
    }
  } else {
    alignas(32) __m256i V[S][16];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      const size_t ho = 32 * (size_t)hs[s];
      if (pf && hs[s] == 0) gemv_step_prefetch<kNearPf<kVnni>>(Bs[s] + pf, kQ6Levels);  // d and the scale planes
      CHIMERA_UNROLL for (int k = 0; k < 4; ++k) {
        const __m256i P = loadu(Bs[s] + kQ6Scales + 64 * k + ho);
        CHIMERA_UNROLL for (int u = 0; u < 4; ++u) {
          V[s][4 * k + u] = _mm256_srai_epi16(_mm256_shuffle_epi8(P, pick_hi_bytes(u)), 8);
        }
      }
      // S = -32 * sum_l (sc_2l, sc_2l+1) . (bsum_2l, bsum_2l+1)
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        __m256i C = _mm256_setzero_si256();
        CHIMERA_UNROLL for (int l = 0; l < 8; ++l) {
          const __m256i W = _mm256_blend_epi16(V[s][2 * l], V[s][2 * l + 1], 0xAA);
          C = _mm256_add_epi32(C, _mm256_madd_epi16(W, bcast32(Am[m] + kAbsums + 4 * l)));
        }
        Sx[s][m] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(C, 5));
      }
    }
    CHIMERA_UNROLL for (int g = 0; g < 16; ++g) {
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        __m256i lv[4];
        group_levels<kNearPf<kVnni>>(Bs[s], hs[s], g, pf, lv);
        const __m256i& Vg = V[s][g];
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          const uint8_t* a = Am[m] + 4 + 16 * g;
          const __m256i t0 =
              _mm256_add_epi16(_mm256_maddubs_epi16(lv[0], bcast32(a)), _mm256_maddubs_epi16(lv[1], bcast32(a + 4)));
          const __m256i t1 =
              _mm256_add_epi16(_mm256_maddubs_epi16(lv[2], bcast32(a + 8)), _mm256_maddubs_epi16(lv[3], bcast32(a + 12)));
          Sx[s][m] = _mm256_add_epi32(Sx[s][m], _mm256_add_epi32(_mm256_madd_epi16(t0, Vg), _mm256_madd_epi16(t1, Vg)));
          // keeps each sum a chain (GCC otherwise reassociates the products
          // into trees and spills them)
          __asm__("" : "+x"(Sx[s][m]));
        }
      }
    }
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(Bs[s] + kQ6D + 16 * hs[s])));
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      float dy;
      std::memcpy(&dy, Am[m], 4);
      acc[s][m] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dy), d8), _mm256_cvtepi32_ps(Sx[s][m]), acc[s][m]);
    }
  }
}

// S 8-row tiles x M activation rows -> y[m * ldy + 8 s + 0..7]. S = 1: rows
// 8 * rh .. + 7 of the group at G; S > 1: both halves of S / 2 groups,
// gbytes apart (tile s = half s % 2 of group s / 2).
template <bool kVnni, int S, int M>
CHIMERA_T_X16A2 void q6_run(const uint8_t* G, size_t gbytes, int rh, const uint8_t* a, size_t a_stride, int64_t nsb,
                            float* y, int64_t ldy, size_t pf) {
  static_assert(S == 1 || S % 2 == 0, "S > 1 runs whole groups");
  __m256 acc[S][M];
  int hs[S];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    hs[s] = S == 1 ? rh : s % 2;
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) acc[s][m] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + (size_t)(s / 2) * gbytes + (size_t)sb * kQ6GroupBlock;
    // the one-group GEMV: the near prefetch of its one stream (gemv_prefetch.h)
    if constexpr (S == 2 && M == 1) gemv_prefetch_ahead<kQ6GroupBlock, kPfX16>(Bs[0], G + (size_t)nsb * kQ6GroupBlock);
    // GEMM tiles: the block 2 further into L1, by the first half's tile (the
    // second half then finds the group in cache; near a group's end that is
    // the next group's first blocks); past the last group a prefetch does
    // not fault. Paired A/B against the same block of the next group into
    // L2 (Zen 5, 4096 x 4096 cold, 2 threads): m = 2 1.15-1.20x, m = 8
    // 1.09-1.13x. (The AVX-512 Q6_K tiles measured it 0.98-1.10x and keep
    // their L2 prefetch.)
    if constexpr (S == 1 && M > 1) {
      if (rh == 0) gemv_step_prefetch<true>(Bs[0] + 2 * kQ6GroupBlock, kQ6GroupBlock);
    }
    const uint8_t* Am[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) Am[m] = a + (size_t)m * a_stride + (size_t)sb * kAb;
    q6_block<kVnni, S, M>(Bs, hs, Am, acc, S > 2 ? gemv_step_pf<kNearPf<kVnni>>(sb, nsb, pf, kQ6GroupBlock) : 0);
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) _mm256_storeu_ps(y + m * ldy + kHalfRows * s, acc[s][m]);
  }
}

// The 16 rows of a group: M = 1 both halves per super-block (the group is
// read once), M > 1 one half after the other (the second reads the group
// blocks again from L1 / L2).
template <bool kVnni, int M>
void q6_tile16(const uint8_t* G, const uint8_t* A, size_t a_stride, int64_t nsb, float* y, int64_t ldy) {
  if constexpr (M == 1) {
    q6_run<kVnni, 2, 1>(G, 0, 0, A, a_stride, nsb, y, ldy, 0);
  } else {
    q6_run<kVnni, 1, M>(G, 0, 0, A, a_stride, nsb, y, ldy, 0);
    q6_run<kVnni, 1, M>(G, 0, 1, A, a_stride, nsb, y + kHalfRows, ldy, 0);
  }
}

// The decode GEMV's multi-stream step (kq_x16_run).
template <bool kVnni>
void q6_gemv(const uint8_t* G, size_t gbytes, const uint8_t* a, int64_t nsb, float* y, size_t pf) {
  q6_run<kVnni, 2 * kX16StreamsAvx2, 1>(G, gbytes, 0, a, 0, nsb, y, 0, pf);
}

template <bool kVnni>
void q6_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr KqX16TileFn kTiles[kMaxActs] = {q6_tile16<kVnni, 1>, q6_tile16<kVnni, 2>, q6_tile16<kVnni, 3>,
                                                   q6_tile16<kVnni, 4>, q6_tile16<kVnni, 5>, q6_tile16<kVnni, 6>};
  kq_x16_run<kX16StreamsAvx2, true>(kTiles, g, r0, r1, i0, i1, q6_gemv<kVnni>);
}

}  // namespace

GemmFn kq_x16_q6_gemm_avx2(bool vnni) { return vnni ? q6_gemm<true> : q6_gemm<false>; }

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_q6_gemm_avx2(bool) { return nullptr; }
}  // namespace chimera::kernels

#endif
