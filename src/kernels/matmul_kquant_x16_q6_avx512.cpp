// AVX-512 Q6_K kernels over the x16 layout (matmul_kquant_x16.h): GEMV and
// GEMM in tiles of 16 weight rows (one per 32-bit lane) x M <= 8 activation
// rows, straight from the packed bytes. Bit-identical to kq_x16_dot_ref (the
// x16 Q6_K order: one exact int32 S per super-block, one f32 update).
//
// Per super-block and 16-element scale group g of a group block:
//   levels: the group's three chunks X0..X2 give its four dwords (c = 0..2:
//     X_c & 63; c = 3: the X_c's top two bits), built once for all M rows;
//   scale: byte g % 4 of plane g / 4, sign-extended into the 32-bit lane
//     (a shift pair);
//   P = -32 * bsum_g (broadcast from a per-row table made at the super-block's
//     start: the level offset from the activation block's bsums) plus the
//     group's 16 products: VNNI 4 vpdpbusd (levels x broadcast activation
//     dword, embedded broadcast from memory), plain AVX-512 4 vpmaddubsw
//     added pairwise in int16 (|.| <= 2 * 2 * 63 * 128 = 32256) and widened by
//     vpmaddwd with ones; |P| <= 16 * 63 * 128 + 32 * 16 * 128 < 2^18;
//   S += P * sc (vpmulld; |S| < 2^29, exact).
// Then acc = fma(dy * d, (float)S, acc). The integers are exact, so both
// instruction orders give the same S and the same bits.
// Per row and group 4 vpdpbusd + vpmulld + vpaddd (llama.cpp's per-lane order
// took 4 vpmaddubsw + 4 vpdpwssd and 8 accumulators per row), so a tile takes
// 8 activation rows: 8 int32 sums + 8 f32 accumulators + 4 levels.
// The decode GEMV (M = 1) reads kX16Streams groups at once, interleaved by
// scale group (the group's 3 chunks of each stream in turn), and prefetches
// the same chunks of each group's next super-block into L1 (kq_x16_run,
// gemv_prefetch.h: the near policy).
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include <cstddef>
#include <cstring>

#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_kquant_x16_simd.h"
#include "kernels/matmul_tile.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

namespace q = chimera::quant;
using x16::bcast32;
using x16::dpbusd_bcast;

constexpr size_t kAb = sizeof(q::block_q8_K);
constexpr size_t kAbsums = offsetof(q::block_q8_K, bsums);
constexpr size_t kQ6GroupBlock = kX16Rows * sizeof(q::block_q6_K);
constexpr size_t kQ6D = 0, kQ6Scales = 32, kQ6Levels = 288;
constexpr int kMaxActs = 8;
// GEMM tiles' L2 prefetch distance, in group blocks (q6_run).
constexpr size_t kPfTile = 3;

// The int32 at p in every lane, loaded by vpbroadcastd (asm: keeps the table
// it reads in memory; GCC otherwise holds it in registers and extracts each
// value with shuffles).
CHIMERA_T_X16_INLINE __m512i bcast_mem32(const int32_t* p) {
  __m512i v;
  __asm__("vpbroadcastd %1, %0" : "=v"(v) : "m"(*p));
  return v;
}

// P + the 16 products of a scale group: levels lv[c] x activation dwords a + 4c.
template <bool kVnni>
CHIMERA_T_X16_INLINE __m512i group_sum(__m512i P, const __m512i (&lv)[4], const uint8_t* a) {
  if constexpr (kVnni) {
    CHIMERA_UNROLL for (int c = 0; c < 4; ++c) P = dpbusd_bcast(P, lv[c], a + 4 * c);
    return P;
  } else {
    const __m512i ones = _mm512_set1_epi16(1);
    const __m512i s0 = _mm512_add_epi16(_mm512_maddubs_epi16(lv[0], bcast32(a)), _mm512_maddubs_epi16(lv[1], bcast32(a + 4)));
    const __m512i s1 =
        _mm512_add_epi16(_mm512_maddubs_epi16(lv[2], bcast32(a + 8)), _mm512_maddubs_epi16(lv[3], bcast32(a + 12)));
    return _mm512_add_epi32(P, _mm512_add_epi32(_mm512_madd_epi16(s0, ones), _mm512_madd_epi16(s1, ones)));
  }
}

// The four level dwords of a scale group from its chunks X .. X + 128.
CHIMERA_T_X16_INLINE void levels4(const uint8_t* X, __m512i (&lv)[4]) {
  const __m512i m6 = _mm512_set1_epi8(0x3F);
  const __m512i X0 = _mm512_loadu_si512(X), X1 = _mm512_loadu_si512(X + 64), X2 = _mm512_loadu_si512(X + 128);
  lv[0] = _mm512_and_si512(X0, m6);
  lv[1] = _mm512_and_si512(X1, m6);
  lv[2] = _mm512_and_si512(X2, m6);
  // 0xD8: c ? b : a (the dead shifted operand first: no register copy).
  // Bits 6-7 of X2, 4-5 of X1 (>> 2), 2-3 of X0 (>> 4).
  const __m512i w = _mm512_ternarylogic_epi32(_mm512_srli_epi16(X1, 2), X2, _mm512_set1_epi8((char)0xC0), 0xD8);
  const __m512i w2 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(X0, 4), w, _mm512_set1_epi8((char)0xF0), 0xD8);
  lv[3] = _mm512_and_si512(_mm512_srli_epi16(w2, 2), m6);
}

// The int8 scale of group g of the 16 rows of group block B, one per 32-bit lane.
CHIMERA_T_X16_INLINE __m512i scale32(const uint8_t* B, int g) {
  const __m512i P = _mm512_loadu_si512(B + kQ6Scales + 64 * (g / 4));
  const int u = g % 4;
  return _mm512_srai_epi32(u == 3 ? P : _mm512_slli_epi32(P, 24 - 8 * u), 24);
}

// One super-block of S groups (group block Bs[s]) x M activation rows (Am[m]:
// row m's Q8_K block) into acc[s][m]. S > 1 (with M = 1) is the decode GEMV's
// multi-stream step (kq_x16_run): the groups are interleaved by scale group
// (3 chunks each), and pf != 0 fetches the same chunks of the groups pf bytes
// further (one group block: the near policy of gemv_prefetch.h). Each group's arithmetic is the same for
// every S and M.
template <bool kVnni, int S, int M>
CHIMERA_T_X16_INLINE void q6_block(const uint8_t* const* Bs, const uint8_t* const* Am, __m512 (&acc)[S][M],
                                   size_t pf) {
  // -32 * bsum_g of each activation row (int32)
  alignas(64) int32_t off[M][16];
  CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
    const __m512i b = _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i*)(Am[m] + kAbsums)));
    _mm512_store_si512(off[m], _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(b, 5)));
  }
  __m512i Sx[S][M];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    if (pf) gemv_step_prefetch<true>(Bs[s] + pf, kQ6Levels);  // d and the scale planes
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) Sx[s][m] = _mm512_setzero_si512();
  }
  CHIMERA_UNROLL for (int g = 0; g < 16; ++g) {
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      const uint8_t* X = Bs[s] + kQ6Levels + 3 * 64 * (size_t)g;
      if (pf) gemv_step_prefetch<true>(X + pf, 3 * 64);
      __m512i lv[4];
      levels4(X, lv);
      const __m512i sc = scale32(Bs[s], g);
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        const __m512i P = group_sum<kVnni>(bcast_mem32(&off[m][g]), lv, Am[m] + 4 + 16 * g);
        Sx[s][m] = _mm512_add_epi32(Sx[s][m], _mm512_mullo_epi32(P, sc));
        // keeps each sum a chain (GCC otherwise reassociates the 16 products
        // of a row into trees and spills the group sums)
        __asm__("" : "+v"(Sx[s][m]));
      }
    }
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(Bs[s] + kQ6D)));
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      float dy;
      std::memcpy(&dy, Am[m], 4);
      acc[s][m] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dy), d16), _mm512_cvtepi32_ps(Sx[s][m]), acc[s][m]);
    }
  }
}

// S groups (gbytes apart) x M activation rows -> y[m * ldy + 16 s + 0..15]:
// the GEMM tiles (S = 1) and the decode GEMV's multi-stream step (M = 1).
template <bool kVnni, int S, int M>
CHIMERA_T_X16 void q6_run(const uint8_t* G, size_t gbytes, const uint8_t* a, size_t a_stride, int64_t nsb, float* y,
                          int64_t ldy, size_t pf) {
  __m512 acc[S][M];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) acc[s][m] = _mm512_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + s * gbytes + (size_t)sb * kQ6GroupBlock;
    if constexpr (S == 1 && M == 1) gemv_prefetch_ahead<kQ6GroupBlock, kPfX16>(Bs[0], G + (size_t)nsb * kQ6GroupBlock);
    // GEMM tiles: the group block kPfTile blocks further on in the stream
    // into L2 (the group blocks of a packed tensor are contiguous, so near a
    // group's end this is the next group's first blocks; past the tensor's
    // end a prefetch does not fault). 8192 x 2048, 1 thread, weights from
    // DRAM (a model's output head): m = 8 ~1350 -> ~720 us, m = 2 ~595 ->
    // ~465 us; the same block of the next group (the Q4_K tiles' choice)
    // gave ~770 / ~530 us; 4, 6 blocks ahead 740, 780 us at m = 8. L3-warm
    // weights (session 15 found the prefetch neutral there): m = 8 ~5 %, m =
    // 2 ~12 % slower.
    if constexpr (S == 1 && M > 1) gemv_prefetch_l2(Bs[0] + kPfTile * kQ6GroupBlock, kQ6GroupBlock);
    const uint8_t* Am[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) Am[m] = a + (size_t)m * a_stride + (size_t)sb * kAb;
    q6_block<kVnni, S, M>(Bs, Am, acc, S > 1 ? gemv_step_pf<true>(sb, nsb, pf, kQ6GroupBlock) : 0);
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) _mm512_storeu_ps(y + m * ldy + kX16Rows * s, acc[s][m]);
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

template <bool kVnni>
void q6_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr KqX16TileFn kTiles[kMaxActs] = {q6_tile<kVnni, 1>, q6_tile<kVnni, 2>, q6_tile<kVnni, 3>,
                                                   q6_tile<kVnni, 4>, q6_tile<kVnni, 5>, q6_tile<kVnni, 6>,
                                                   q6_tile<kVnni, 7>, q6_tile<kVnni, 8>};
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
