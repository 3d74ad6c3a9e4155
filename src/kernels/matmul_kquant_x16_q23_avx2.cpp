// AVX2 Q2_K / Q3_K kernels over the x16 layout (matmul_kquant_x16.h): each
// 64-byte chunk of a group block is two 256-bit halves (rows 0..7, rows
// 8..15), so a tile is 8 weight rows (one per 32-bit lane) x M <= 3
// activation rows, and a group is two tiles.
//
// Arithmetic: per lane l of llama.cpp's AVX2 vec_dot the same exact int32
// S_l and the same f32 order (Q2_K: acc_l = fma(-dy * dmin, B_l, acc_l), then
// acc_l = fma(dy * d, S_l, acc_l); Q3_K only the latter; then
// matmul_kquant.h's reduction): bit-identical to the storage-layout kernels.
// Per lane l and half h, Q2_K's qs chunk 8h + l gives the 4 quarters' levels
// of every row ((qs >> 2j) & 3), Q3_K's three level chunks of lane l all 8
// (19 byte operations); p = vpmaddubsw(levels, broadcast activation dword) (Q3_K minus
// vpmaddubsw(4, activations), shared by all rows and kept on the stack), then
// S_l += vpmaddwd(p, (sc_g, sc_g)) with the row's scale of group
// g = 8h + 2j + l / 4 (one vpshufb of its scale plane). No decoded panel,
// no per-element shuffles.
// The decode GEMV reads kX16StreamsQ23Avx2 groups at once, lane-interleaved,
// with an L2 prefetch of the next ones (kq_x16_run, gemv_prefetch.h): one
// body q23_block<S tiles, M rows> for the GEMM tiles (S = 1), the one-group
// GEMV (S = 2, the groups left over) and the step (S = 2 * kX16StreamsQ23Avx2).
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_kquant_x16_simd_avx2.h"
#include "kernels/matmul_tile.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

using x16a2::pick_words;
using x16a2::bcast32;
using x16a2::loadu;
using x16a2::load_reg;
using x16a2::bcast32_reg;
using x16a2::madd_mem;

using format::GgmlType;
namespace q = chimera::quant;

constexpr size_t kAb = sizeof(q::block_q8_K);
constexpr size_t kBsums = 4 + 256;  // offset of bsums in a block_q8_K
constexpr int kHalfRows = 8;
constexpr int kMaxActs = 3;

// Group-block geometry (matmul_kquant_x16.h).
template <bool kQ3>
struct Geo {
  static constexpr size_t kBlock = kX16Rows * (kQ3 ? sizeof(q::block_q3_K) : sizeof(q::block_q2_K));
  static constexpr size_t kDmin = 32;                  // Q2_K
  static constexpr size_t kScales = kQ3 ? 32 : 64;     // Q3_K: 3 packed chunks, Q2_K: 4 planes
  static constexpr size_t kLevels = 224;  // Q3_K: 24 level chunks
  static constexpr size_t kQs = 320;     // Q2_K: 16 qs chunks
};

// Per byte: bits s, s + 1 moved to bits 4, 5 (a Q3_K scale's top two bits).
CHIMERA_T_X16A2_INLINE __m256i top2(__m256i u2, int s) {
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(u2, s), _mm256_set1_epi8(0x03)), 4);
}

// The per-super-block setup of S tiles x M rows: V[s][g] = (sc, sc) of group
// g of tile s's 8 rows, dv[s][m] = dy[m] * d, and Q2_K's mins into acc
// (first, as llama.cpp).
template <bool kQ3, int S, int M>
CHIMERA_T_X16A2_INLINE void q23_setup(const uint8_t* const (&Bs)[S], const int (&hs)[S],
                                      const uint8_t* const (&Am)[M], const float (&dy)[M], __m256i (&V)[S][16],
                                      __m256 (&dv)[S][M], __m256 (&acc)[S][M][8], size_t pf) {
  using GB = Geo<kQ3>;
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const uint8_t* B = Bs[s];
    const size_t ho = 32 * (size_t)hs[s];  // byte offset of this half in a 64-byte chunk
    if (pf && hs[s] == 0) gemv_prefetch_l2(B + pf, kQ3 ? GB::kLevels : GB::kQs);  // d (dmin) and the scales
    const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(B + 16 * hs[s])));
    // Scale planes: byte 4r + u of plane t = the value of group 4t + u of row r.
    __m256i P[4];
    if constexpr (kQ3) {
      // q3_K_scales_biased on 32-bit lanes: biased six-bit scales
      const __m256i u0 = loadu(B + GB::kScales + ho), u1 = loadu(B + GB::kScales + 64 + ho);
      const __m256i u2 = loadu(B + GB::kScales + 128 + ho);
      const __m256i m4 = _mm256_set1_epi8(0x0F);
      P[0] = _mm256_or_si256(_mm256_and_si256(u0, m4), top2(u2, 0));
      P[1] = _mm256_or_si256(_mm256_and_si256(u1, m4), top2(u2, 2));
      P[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(u0, 4), m4), top2(u2, 4));
      P[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(u1, 4), m4), top2(u2, 6));
    } else {
      CHIMERA_UNROLL for (int t = 0; t < 4; ++t) P[t] = loadu(B + GB::kScales + 64 * (size_t)t + ho);
    }
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      dv[s][m] = _mm256_mul_ps(_mm256_set1_ps(dy[m]), d8);
      if constexpr (!kQ3) {
        // mins first (llama.cpp's order): acc_l = fma(-dy * dmin, B_l, acc_l),
        // B_l = m_2l * bsum_2l + m_2l+1 * bsum_2l+1
        const __m256 dmv = _mm256_mul_ps(
            _mm256_set1_ps(-dy[m]), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(B + GB::kDmin + 16 * hs[s]))));
        CHIMERA_UNROLL for (int l = 0; l < 8; ++l) {
          const __m256i mins =
              _mm256_srli_epi16(_mm256_shuffle_epi8(P[l / 2], pick_words(2 * (l % 2), 2 * (l % 2) + 1)), 4);
          const __m256i Bl = _mm256_madd_epi16(mins, bcast32(Am[m] + kBsums + 4 * l));
          acc[s][m][l] = _mm256_fmadd_ps(dmv, _mm256_cvtepi32_ps(Bl), acc[s][m][l]);
        }
      }
    }
    // Q2_K: the scale nibbles masked once per plane (4 vpand, not one per group)
    if constexpr (!kQ3) {
      CHIMERA_UNROLL for (int t = 0; t < 4; ++t) P[t] = _mm256_and_si256(P[t], _mm256_set1_epi8(0x0F));
    }
    CHIMERA_UNROLL for (int gi = 0; gi < 16; ++gi) {
      const __m256i w = _mm256_shuffle_epi8(P[gi / 4], pick_words(gi % 4, gi % 4));
      V[s][gi] = kQ3 ? _mm256_sub_epi16(w, _mm256_set1_epi16(32)) : w;
    }
  }
}

// Q3_K level of quarter 4h + j of one lane of a tile (X: the lane's level
// chunks at the tile's half; matmul_kquant_x16.h: X0 = q0 | q1 << 3 |
// (q6 & 3) << 6, X1 likewise with q2, q3, q7, X2 = q4 | q5 << 3 |
// (q6 >> 2) << 6 | (q7 >> 2) << 7), its chunks loaded as used.
CHIMERA_T_X16A2_INLINE __m256i q3_level(const uint8_t* X, int h, int j) {
  const __m256i m7 = _mm256_set1_epi8(7), m3 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4);
  if (h == 0) {
    const __m256i Xk = load_reg(X + 64 * (j / 2));  // X0: quarters 0, 1; X1: 2, 3
    return _mm256_and_si256(j % 2 ? _mm256_srli_epi16(Xk, 3) : Xk, m7);
  }
  const __m256i X2 = load_reg(X + 128);
  if (j < 2) return _mm256_and_si256(j % 2 ? _mm256_srli_epi16(X2, 3) : X2, m7);
  const __m256i Xk = load_reg(X + 64 * (j - 2));
  return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(Xk, 6), m3),
                         _mm256_and_si256(_mm256_srli_epi16(X2, j + 2), b2));
}

// One super-block of S 8-row tiles x M activation rows (Am[m]: row m's Q8_K
// block, scale dy[m]; Om[m]: Q3_K's vpmaddubsw(4, activations) words) into
// acc[s][m][0..7]; tile s is rows 8 * hs[s] .. + 7 (byte offset 32 * hs[s] in
// every chunk / plane) of group block Bs[s]. After q23_setup (the scale
// pairs on the stack, vpmaddwd memory operands), lane by lane: S_l of every
// tile and row over both halves h and the 4 quarters j, the activation
// dwords broadcast once per (h, j) for all tiles. Loads, sums and order are
// explicit (load_reg, bcast32_reg, madd_mem, the empty asm pins, a memory
// barrier per step): with GCC's own schedule the GEMV was load-bound on Zen
// 3 (activation broadcasts kept on the stack, sums spilled). Q2_K keeps a
// tile's qs line of the lane in a register for its 4 quarters; Q3_K loads
// its level chunks per quarter (q3_level).
// The GEMM tiles are S = 1 (one half of a group, M <= 3). The decode GEMV
// (M = 1) runs both halves of each group (S = 2: the group's bytes are read
// once per super-block) and its multi-stream step kX16StreamsQ23Avx2 groups
// (S = 2 * kX16StreamsQ23Avx2): lane by lane, the lane's chunk halves of
// every tile in turn (Q2_K: its 2 qs lines, Q3_K: its 3 level lines), so the
// groups are interleaved by lane; pf != 0 fetches the same lines of the
// groups pf bytes further into L2 (gemv_prefetch.h). Each tile's arithmetic
// is the same for every S and M.
template <bool kQ3, int S, int M>
CHIMERA_T_X16A2_INLINE void q23_block(const uint8_t* const (&Bs)[S], const int (&hs)[S],
                                      const uint8_t* const (&Am)[M], const uint8_t* const (&Om)[M],
                                      const float (&dy)[M], __m256 (&acc)[S][M][8], size_t pf) {
  using GB = Geo<kQ3>;
  alignas(32) __m256i V[S][16];
  __m256 dv[S][M];
  q23_setup<kQ3, S, M>(Bs, hs, Am, dy, V, dv, acc, pf);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  CHIMERA_UNROLL for (int l = 0; l < 8; ++l) {
    const int lh = l / 4;
    __m256i Sm[S][M];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) Sm[s][m] = _mm256_setzero_si256();
    }
    CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
      __m256i W[S];
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        const size_t ho = 32 * (size_t)hs[s];
        if constexpr (kQ3) {
          if (pf && hs[s] == 0 && h == 0) gemv_prefetch_l2(Bs[s] + GB::kLevels + 64 * 3 * (size_t)l + pf, 3 * 64);
        } else {
          const uint8_t* Q = Bs[s] + GB::kQs + 64 * (size_t)(8 * h + l);
          if (pf && hs[s] == 0) gemv_prefetch_l2(Q + pf, 64);
          W[s] = load_reg(Q + ho);
        }
      }
      CHIMERA_UNROLL for (int j = 0; j < 4; ++j) {
        __asm__ volatile("" ::: "memory");  // no loads hoisted across steps
        const int e = 128 * h + 32 * j + 4 * l;
        __m256i a[M], o[M];
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          a[m] = bcast32_reg(Am[m] + 4 + e);
          if constexpr (kQ3) o[m] = bcast32_reg(Om[m] + e);
        }
        CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
          __m256i lv;
          if constexpr (kQ3) {
            lv = q3_level(Bs[s] + GB::kLevels + 64 * 3 * (size_t)l + 32 * (size_t)hs[s], h, j);
          } else {
            lv = _mm256_and_si256(j == 0 ? W[s] : _mm256_srli_epi16(W[s], 2 * j), m3);
          }
          // one row: the scale pair as vpmaddwd's memory operand; M rows: loaded once
          [[maybe_unused]] __m256i Vr;
          if constexpr (M > 1) Vr = load_reg((const uint8_t*)&V[s][8 * h + 2 * j + lh]);
          CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
            __m256i p = _mm256_maddubs_epi16(lv, a[m]);
            if constexpr (kQ3) p = _mm256_sub_epi16(p, o[m]);
            const __m256i q = M > 1 ? _mm256_madd_epi16(p, Vr) : madd_mem(p, &V[s][8 * h + 2 * j + lh]);
            Sm[s][m] = _mm256_add_epi32(Sm[s][m], q);
            __asm__("" : "+x"(Sm[s][m]));
          }
        }
      }
    }
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        acc[s][m][l] = _mm256_fmadd_ps(dv[s][m], _mm256_cvtepi32_ps(Sm[s][m]), acc[s][m][l]);
      }
    }
  }
}

// S 8-row tiles x M activation rows -> y[m * ldy + 8 s + 0..7]. S = 1: rows
// 8 * rh .. + 7 of the group at G; S > 1: both halves of S / 2 groups,
// gbytes apart (tile s = half s % 2 of group s / 2).
template <bool kQ3, int S, int M>
CHIMERA_T_X16A2 void q23_run8(const uint8_t* G, size_t gbytes, int rh, const uint8_t* a, size_t a_stride,
                              int64_t nsb, float* y, int64_t ldy, size_t pf) {
  static_assert(S == 1 || S % 2 == 0, "S > 1 runs whole groups");
  using GB = Geo<kQ3>;
  [[maybe_unused]] alignas(32) int16_t off[kQ3 ? M : 1][128];
  __m256 acc[S][M][8];
  int hs[S];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    hs[s] = S == 1 ? rh : s % 2;
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[s][m][l] = _mm256_setzero_ps();
    }
  }
  // The decode GEMV's f32 lane sums live on the stack (their address escapes,
  // so the memory barriers keep them there): GCC otherwise held 9 of the 32
  // in registers across super-blocks and spilled the int32 sums. (The GEMM
  // tiles measured faster without: llvm-mca -mcpu=znver3.)
  if constexpr (M == 1) __asm__ volatile("" : : "r"(&acc[0][0][0]) : "memory");
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + (size_t)(s / 2) * gbytes + (size_t)sb * GB::kBlock;
    // the one-group GEMV: the near prefetch of its one stream (gemv_prefetch.h)
    if constexpr (S == 2 && M == 1) gemv_prefetch_ahead<GB::kBlock, kPfX16>(Bs[0], G + (size_t)nsb * GB::kBlock);
    const uint8_t* Am[M];
    const uint8_t* Om[M];
    float dy[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      Am[m] = a + (size_t)m * a_stride + (size_t)sb * kAb;
      std::memcpy(&dy[m], Am[m], 4);
      Om[m] = nullptr;
      if constexpr (kQ3) {  // the level offset 4 * a_e, shared by all tiles
        const __m256i c4 = _mm256_set1_epi8(4);
        CHIMERA_UNROLL for (int j = 0; j < 8; ++j) {
          _mm256_store_si256((__m256i*)(off[m] + 16 * j), _mm256_maddubs_epi16(c4, loadu(Am[m] + 4 + 32 * j)));
        }
        Om[m] = (const uint8_t*)off[m];
      }
    }
    q23_block<kQ3, S, M>(Bs, hs, Am, Om, dy, acc, pf);
  }
  // matmul_kquant.h's reduction (Q2_K's mins are in the lanes), lane (= row) for lane
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
template <bool kQ3, int M>
void q23_tile16(const uint8_t* G, const uint8_t* A, size_t a_stride, int64_t nsb, float* y, int64_t ldy) {
  if constexpr (M == 1) {
    q23_run8<kQ3, 2, 1>(G, 0, 0, A, a_stride, nsb, y, ldy, 0);
  } else {
    q23_run8<kQ3, 1, M>(G, 0, 0, A, a_stride, nsb, y, ldy, 0);
    q23_run8<kQ3, 1, M>(G, 0, 1, A, a_stride, nsb, y + kHalfRows, ldy, 0);
  }
}

// The decode GEMV's multi-stream step (kq_x16_run).
template <bool kQ3>
void q23_gemv(const uint8_t* G, size_t gbytes, const uint8_t* a, int64_t nsb, float* y, size_t pf) {
  q23_run8<kQ3, 2 * kX16StreamsQ23Avx2, 1>(G, gbytes, 0, a, 0, nsb, y, 0, pf);
}

template <bool kQ3>
void q23_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr KqX16TileFn kTiles[kMaxActs] = {q23_tile16<kQ3, 1>, q23_tile16<kQ3, 2>, q23_tile16<kQ3, 3>};
  kq_x16_run<kX16StreamsQ23Avx2>(kTiles, g, r0, r1, i0, i1, q23_gemv<kQ3>);
}

}  // namespace

GemmFn kq_x16_q23_gemm_avx2(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K: return q23_gemm<false>;
    case GgmlType::Q3_K: return q23_gemm<true>;
    default: return nullptr;
  }
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_q23_gemm_avx2(format::GgmlType) { return nullptr; }
}  // namespace chimera::kernels

#endif
