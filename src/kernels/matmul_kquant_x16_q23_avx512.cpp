// AVX-512 Q2_K / Q3_K kernels over the x16 layout (matmul_kquant_x16.h): GEMV
// and GEMM in tiles of 16 weight rows (one per 32-bit lane) x M <= 4
// activation rows, straight from the packed bytes; the AVX2 kernels
// (matmul_kquant_x16_q23_avx2.cpp, where the arithmetic is described) on
// 512-bit vectors. Per lane l of llama.cpp's AVX2 vec_dot the same exact int32
// S_l and f32 order: bit-identical to the storage-layout kernels. VNNI adds
// each scaled pair sum with one vpdpwssd, plain AVX-512 with vpmaddwd +
// vpaddd (the same exact int32). The decode GEMV reads kX16StreamsQ23 groups
// at once, chunk-interleaved, with an L2 prefetch of the next ones
// (kq_x16_run, gemv_prefetch.h): q23_run with S = kX16StreamsQ23, M = 1; the
// GEMM tiles and leftover groups are S = 1.
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

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
using x16::pick_words;

constexpr size_t kAb = sizeof(q::block_q8_K);
constexpr size_t kBsums = 4 + 256;  // offset of bsums in a block_q8_K
constexpr int kMaxActs = 4;

// Group-block geometry (matmul_kquant_x16.h).
template <bool kQ3>
struct Geo {
  static constexpr size_t kBlock = kX16Rows * (kQ3 ? sizeof(q::block_q3_K) : sizeof(q::block_q2_K));
  static constexpr size_t kDmin = 32;               // Q2_K
  static constexpr size_t kScales = kQ3 ? 32 : 64;  // Q3_K: 3 packed chunks, Q2_K: 4 planes
  static constexpr size_t kLevels = 224;  // Q3_K: 24 level chunks
  static constexpr size_t kQs = 320;     // Q2_K: 16 qs chunks
};

CHIMERA_T_X16_INLINE __m512i loadu(const uint8_t* p) { return _mm512_loadu_si512(p); }

// Q3_K levels of quarters 4h .. 4h + 3 of one lane from its level chunks at X
// (matmul_kquant_x16.h: X0 = q0 | q1 << 3 | (q6 & 3) << 6, X1 likewise with
// q2, q3, q7, X2 = q4 | q5 << 3 | (q6 >> 2) << 6 | (q7 >> 2) << 7).
CHIMERA_T_X16_INLINE void q3_quarters(const uint8_t* X, int h, __m512i lv[4]) {
  const __m512i m7 = _mm512_set1_epi8(7), m3 = _mm512_set1_epi8(3), b2 = _mm512_set1_epi8(4);
  const __m512i X0 = loadu(X), X1 = loadu(X + 64);
  if (h == 0) {
    lv[0] = _mm512_and_si512(X0, m7);
    lv[1] = _mm512_and_si512(_mm512_srli_epi16(X0, 3), m7);
    lv[2] = _mm512_and_si512(X1, m7);
    lv[3] = _mm512_and_si512(_mm512_srli_epi16(X1, 3), m7);
  } else {
    const __m512i X2 = loadu(X + 128);
    lv[0] = _mm512_and_si512(X2, m7);
    lv[1] = _mm512_and_si512(_mm512_srli_epi16(X2, 3), m7);
    lv[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(X0, 6), m3),
                            _mm512_and_si512(_mm512_srli_epi16(X2, 4), b2));
    lv[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(X1, 6), m3),
                            _mm512_and_si512(_mm512_srli_epi16(X2, 5), b2));
  }
}

// Per byte: bits s, s + 1 moved to bits 4, 5 (a Q3_K scale's top two bits).
CHIMERA_T_X16_INLINE __m512i top2(__m512i u2, int s) {
  return _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(u2, s), _mm512_set1_epi8(0x03)), 4);
}

// The four scale planes of group block B: byte 4r + u of plane t = the value
// of group 4t + u of row r (Q3_K: q3_K_scales_biased on 32-bit lanes, the
// biased six-bit scales; Q2_K: scale | min << 4 as stored).
template <bool kQ3>
CHIMERA_T_X16_INLINE void scale_planes(const uint8_t* B, __m512i (&P)[4]) {
  using GB = Geo<kQ3>;
  if constexpr (kQ3) {
    const __m512i u0 = loadu(B + GB::kScales), u1 = loadu(B + GB::kScales + 64), u2 = loadu(B + GB::kScales + 128);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    P[0] = _mm512_or_si512(_mm512_and_si512(u0, m4), top2(u2, 0));
    P[1] = _mm512_or_si512(_mm512_and_si512(u1, m4), top2(u2, 2));
    P[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(u0, 4), m4), top2(u2, 4));
    P[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(u1, 4), m4), top2(u2, 6));
  } else {
    CHIMERA_UNROLL for (int t = 0; t < 4; ++t) P[t] = loadu(B + GB::kScales + 64 * (size_t)t);
  }
}

// One super-block of S groups (group block Bs[s]) x M activation rows (Am[m]:
// row m's Q8_K block, scale dy[m]; Om[m]: Q3_K's vpmaddubsw(4, activations)
// words) into acc[s][m][0..7]: Q2_K's mins, then per lane half lh (lanes
// l = 4 lh + i) group by group, both halves h of each. S > 1 (with M = 1) is
// the decode GEMV's multi-stream step (kq_x16_run): the groups are
// interleaved chunk by chunk (per lane half, Q2_K its 8 qs lines, Q3_K its 12
// level lines of each group in turn; the scale planes are rebuilt per group
// and half so that the (sc, sc) word pairs stay in registers), and pf != 0
// fetches the same lines of the groups pf bytes further into L2
// (gemv_prefetch.h). Each group's arithmetic is the same for every S.
template <bool kVnni, bool kQ3, int S, int M>
CHIMERA_T_X16_INLINE void q23_block(const uint8_t* const (&Bs)[S], const uint8_t* const (&Am)[M],
                                    const uint8_t* const (&Om)[M], const float (&dy)[M], __m512 (&acc)[S][M][8],
                                    size_t pf) {
  using GB = Geo<kQ3>;
  const __m512i m3 = _mm512_set1_epi8(0x03);
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const uint8_t* B = Bs[s];
    if (pf) gemv_prefetch_l2(B + pf, kQ3 ? GB::kLevels : GB::kQs);  // d (dmin) and the scales
    if constexpr (!kQ3) {
      // mins first (llama.cpp's order): acc_l = fma(-dy * dmin, B_l, acc_l),
      // B_l = m_2l * bsum_2l + m_2l+1 * bsum_2l+1
      __m512i P[4];
      scale_planes<kQ3>(B, P);
      const __m512 dmin16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(B + GB::kDmin)));
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        const __m512 dmv = _mm512_mul_ps(_mm512_set1_ps(-dy[m]), dmin16);
        CHIMERA_UNROLL for (int l = 0; l < 8; ++l) {
          const __m512i mins =
              _mm512_srli_epi16(_mm512_shuffle_epi8(P[l / 2], pick_words(2 * (l % 2), 2 * (l % 2) + 1)), 4);
          const __m512i Bl = _mm512_madd_epi16(mins, bcast32(Am[m] + kBsums + 4 * l));
          acc[s][m][l] = _mm512_fmadd_ps(dmv, _mm512_cvtepi32_ps(Bl), acc[s][m][l]);
        }
      }
    }
  }
  // Broadcast dwords straight from memory (a load-port vpbroadcastd).
  const uint8_t* Ab[M];
  const uint8_t* Ob[M];
  CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
    Ab[m] = Am[m] + 4;
    Ob[m] = Om[m];
    __asm__("" : "+r"(Ab[m]), "+r"(Ob[m]));
  }
  CHIMERA_UNROLL for (int lh = 0; lh < 2; ++lh) {
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      const uint8_t* B = Bs[s];
      __m512i P[4];
      scale_planes<kQ3>(B, P);
      __m512i Sx[M][4];
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        CHIMERA_UNROLL for (int i = 0; i < 4; ++i) Sx[m][i] = _mm512_setzero_si512();
      }
      CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
        if (pf) {  // the lines of lanes 4 lh .. 4 lh + 3 (Q3_K: all three chunks of each, at h = 0)
          if constexpr (kQ3) {
            if (h == 0) gemv_prefetch_l2(B + GB::kLevels + 64 * 12 * (size_t)lh + pf, 12 * 64);
          } else {
            gemv_prefetch_l2(B + GB::kQs + 64 * (size_t)(8 * h + 4 * lh) + pf, 4 * 64);
          }
        }
        __m512i V[4];  // (sc, sc) of quarter j: group 8h + 2j + lh
        CHIMERA_UNROLL for (int j = 0; j < 4; ++j) {
          const int gi = 8 * h + 2 * j + lh;
          const __m512i w = _mm512_shuffle_epi8(P[gi / 4], pick_words(gi % 4, gi % 4));
          V[j] = kQ3 ? _mm512_sub_epi16(w, _mm512_set1_epi16(32)) : _mm512_and_si512(w, _mm512_set1_epi16(0x0F));
        }
        CHIMERA_UNROLL for (int i = 0; i < 4; ++i) {
          const int l = 4 * lh + i;
          __m512i lv[4];
          if constexpr (kQ3) {
            q3_quarters(B + GB::kLevels + 64 * 3 * (size_t)l, h, lv);
          } else {
            const __m512i Q = loadu(B + GB::kQs + 64 * (size_t)(8 * h + l));
            CHIMERA_UNROLL for (int j = 0; j < 4; ++j) {
              lv[j] = _mm512_and_si512(j == 0 ? Q : _mm512_srli_epi16(Q, 2 * j), m3);
            }
          }
          CHIMERA_UNROLL for (int j = 0; j < 4; ++j) {
            const int e = 128 * h + 32 * j + 4 * l;
            CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
              __m512i p = _mm512_maddubs_epi16(lv[j], bcast32(Ab[m] + e));
              if constexpr (kQ3) p = _mm512_sub_epi16(p, bcast32(Ob[m] + e));
              Sx[m][i] = dpwssd<kVnni>(Sx[m][i], p, V[j]);
            }
          }
        }
      }
      const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)B));
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        const __m512 dv = _mm512_mul_ps(_mm512_set1_ps(dy[m]), d16);
        CHIMERA_UNROLL for (int i = 0; i < 4; ++i) {
          acc[s][m][4 * lh + i] = _mm512_fmadd_ps(dv, _mm512_cvtepi32_ps(Sx[m][i]), acc[s][m][4 * lh + i]);
        }
      }
    }
  }
}

// S groups (gbytes apart) x M activation rows (a, a_stride apart) ->
// y[m * ldy + 16 s + 0..15]: the GEMM tiles (S = 1) and the decode GEMV's
// multi-stream step (M = 1).
template <bool kVnni, bool kQ3, int S, int M>
CHIMERA_T_X16 void q23_run(const uint8_t* G, size_t gbytes, const uint8_t* a, size_t a_stride, int64_t nsb, float* y,
                           int64_t ldy, size_t pf) {
  using GB = Geo<kQ3>;
  [[maybe_unused]] alignas(64) int16_t off[kQ3 ? M : 1][128];
  __m512 acc[S][M][8];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[s][m][l] = _mm512_setzero_ps();
    }
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + s * gbytes + (size_t)sb * GB::kBlock;
    // the one-group GEMV: the near prefetch of its one stream (gemv_prefetch.h)
    if constexpr (S == 1 && M == 1) gemv_prefetch_ahead<GB::kBlock, kPfX16>(Bs[0], G + (size_t)nsb * GB::kBlock);
    const uint8_t* Am[M];
    const uint8_t* Om[M];
    float dy[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      Am[m] = a + (size_t)m * a_stride + (size_t)sb * kAb;
      std::memcpy(&dy[m], Am[m], 4);
      Om[m] = nullptr;
      if constexpr (kQ3) {  // the level offset 4 * a_e, shared by all groups
        const __m512i c4 = _mm512_set1_epi8(4);
        CHIMERA_UNROLL for (int j = 0; j < 4; ++j) {
          _mm512_store_si512(off[m] + 32 * j, _mm512_maddubs_epi16(c4, loadu(Am[m] + 4 + 64 * j)));
        }
        Om[m] = (const uint8_t*)off[m];
      }
    }
    q23_block<kVnni, kQ3, S, M>(Bs, Am, Om, dy, acc, pf);
  }
  // matmul_kquant.h's reduction (Q2_K's mins are in the lanes), lane (= row) for lane
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      const __m512* c = acc[s][m];
      const __m512 y16 = x16::lane_sum8(c);
      _mm512_storeu_ps(y + m * ldy + kX16Rows * s, y16);
    }
  }
}

template <bool kVnni, bool kQ3, int M>
CHIMERA_T_X16 void q23_tile(const uint8_t* G, const uint8_t* a, size_t a_stride, int64_t nsb, float* y,
                            int64_t ldy) {
  q23_run<kVnni, kQ3, 1, M>(G, 0, a, a_stride, nsb, y, ldy, 0);
}

template <bool kVnni, bool kQ3>
CHIMERA_T_X16 void q23_gemv(const uint8_t* G, size_t gbytes, const uint8_t* a, int64_t nsb, float* y, size_t pf) {
  q23_run<kVnni, kQ3, kX16StreamsQ23, 1>(G, gbytes, a, 0, nsb, y, 0, pf);
}

template <bool kVnni, bool kQ3>
void q23_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr KqX16TileFn kTiles[kMaxActs] = {q23_tile<kVnni, kQ3, 1>, q23_tile<kVnni, kQ3, 2>,
                                                   q23_tile<kVnni, kQ3, 3>, q23_tile<kVnni, kQ3, 4>};
  kq_x16_run<kX16StreamsQ23>(kTiles, g, r0, r1, i0, i1, q23_gemv<kVnni, kQ3>);
}

}  // namespace

GemmFn kq_x16_q23_gemm_avx512(GgmlType type, bool vnni) {
  switch (type) {
    case GgmlType::Q2_K: return vnni ? q23_gemm<true, false> : q23_gemm<false, false>;
    case GgmlType::Q3_K: return vnni ? q23_gemm<true, true> : q23_gemm<false, true>;
    default: return nullptr;
  }
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_q23_gemm_avx512(format::GgmlType, bool) { return nullptr; }
}  // namespace chimera::kernels

#endif
