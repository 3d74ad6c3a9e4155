// AVX-512 IQ4_XS kernel over the x16 layout (matmul_kquant_x16.h): each
// 64-byte chunk of a group block holds 4 index bytes of each of the 16 rows,
// one row per 32-bit lane, so a tile is the 16 rows of a group x M <= kMaxActs
// activation rows. The decode GEMV reads kX16Streams groups at once, lane by
// lane, with an L1 prefetch of their next super-block (kq_x16_run, gemv_prefetch.h):
// iq4_block with S = kX16Streams, M = 1; the GEMM tiles and leftover groups
// are S = 1.
//
// The activations are the AVX-512 storage kernel's (matmul_iq4xs_avx512.cpp,
// pack_act_regrouped: one pack_act serves both layouts): Q8_K blocks whose
// int8 values of each half super-block are regrouped as 16-byte chunks
// 0,2,4,6,1,3,5,7, so element 32j + 4l + u of sub-block j is at byte
// 128(j / 4) + 16(j % 4) + 4l + u and element 32j + 16 + 4l + u 64 bytes
// further.
//
// Keeps matmul_iq4xs.h's arithmetic lane for lane (bit-identical to the
// scalar, storage and AVX2 x16 kernels): qs chunk 4j + l holds index bytes
// qs[16j + 4l ..] of each row, whose low nibbles are the elements of
// llama.cpp lane l of sub-block j and whose high nibbles those of lane l + 4.
// Per chunk: vpshufb of the |codebook| by both nibbles gives |w|, the
// broadcast activation dword is negated where w < 0 (index < 8: a vptestnmb
// mask and a masked vpsubb, as the storage kernel), vpmaddubsw(|w|, ±a)
// (Q8_K values are in [-127, 127]: |pair| <= 2 * 127 * 127, no saturation)
// and the (ls_j - 32) word pair by vpmaddwd + vpaddd, or one vpdpwssd on
// VNNI -> the exact int32 S_l / S_l+4 of 16 rows. Per super-block the lanes' f32 fma with f16(d) * d_a, and at
// the end finish8's order across the 8 lane vectors.
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_kquant_x16_simd.h"
#include "kernels/matmul_tile.h"
#include "quant/iq4xs_blocks.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

namespace q = chimera::quant;
using x16::bcast32;
using x16::dpwssd;

constexpr size_t kAb = sizeof(q::block_q8_K);
// Group block (matmul_kquant_x16.h): d[16], scales_h[16], scales_l chunk, 32 qs chunks.
constexpr size_t kBlock = kX16Rows * sizeof(q::block_iq4_xs);  // 2176
constexpr size_t kD = 0, kSh = 32, kSl = 64, kQs = 128;
constexpr int kMaxActs = 4;

// |kIq4nlValues|; indices 0..7 are the negative entries.
alignas(16) constexpr uint8_t kAbsValues[16] = {127, 104, 83, 65, 49, 35, 22, 10, 1, 13, 25, 38, 53, 69, 89, 113};

// Offset in a regrouped Q8_K block (above) of the activation dword that
// meets the low nibbles of qs chunk 4j + l (the high nibbles: + 64).
constexpr size_t act_offset(int j, int l) { return 4 + 128 * (size_t)(j / 4) + 16 * (size_t)(j % 4) + 4 * (size_t)l; }

// One super-block of S groups (group block Bs[s]) x M activation rows (Am[m]:
// row m's regrouped Q8_K block, scale dy[m]) into acc[s][m][0..7] (the 8
// llama.cpp lanes of 16 rows). S > 1 (with M = 1) is the decode GEMV's
// multi-stream step (kq_x16_run): the groups are interleaved lane by lane
// (the 8 chunks of lane l of each group in turn), and pf != 0 fetches into
// L1, per lane step, the next 8 qs lines (lane l: chunks 8l .. 8l + 7) of the
// groups pf bytes further (one group block: the near policy), so the 4 lane
// steps fetch the whole next group blocks (gemv_prefetch.h). Each group's arithmetic is the same for every S.
template <bool kVnni, int S, int M>
CHIMERA_T_X16_INLINE void iq4_block(const uint8_t* const (&Bs)[S], const uint8_t* const (&Am)[M],
                                    const float (&dy)[M], __m512 (&acc)[S][M][8], size_t pf) {
  const __m512i absv = _mm512_broadcast_i32x4(_mm_load_si128((const __m128i*)kAbsValues));
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i bit3 = _mm512_set1_epi8(0x08), bit7 = _mm512_set1_epi8((char)0x80);
  const __m512i zero = _mm512_setzero_si512();
  __m512 dd[S][M];
  // (ls_j - 32, ls_j - 32) word pairs of the 16 rows of each group, j = 0..7
  alignas(64) __m512i sc[S][8];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const uint8_t* B = Bs[s];
    if (pf) gemv_step_prefetch<true>(B + pf, kQs);  // d and the scales
    const __m512 d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(B + kD)));
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) dd[s][m] = _mm512_mul_ps(d16, _mm512_set1_ps(dy[m]));
    const __m512i sl = _mm512_loadu_si512(B + kSl);
    const __m512i sh = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(B + kSh))), 4);
    CHIMERA_UNROLL for (int j = 0; j < 8; ++j) {
      const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, 4 * j), _mm512_set1_epi32(0xF));
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * j), _mm512_set1_epi32(0x30));
      const __m512i v = _mm512_or_si512(lo, hi);
      sc[s][j] = _mm512_sub_epi16(_mm512_or_si512(v, _mm512_slli_epi32(v, 16)), _mm512_set1_epi16(32));
    }
  }
  CHIMERA_UNROLL for (int l = 0; l < 4; ++l) {
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
      const uint8_t* qs = Bs[s] + kQs;
      if (pf) gemv_step_prefetch<true>(qs + 64 * 8 * l + pf, 64 * 8);
      __m512i Slo[M], Shi[M];
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) Slo[m] = Shi[m] = zero;
      CHIMERA_UNROLL for (int j = 0; j < 8; ++j) {
        const __m512i W = _mm512_loadu_si512(qs + 64 * (4 * j + l));
        const __m512i wlo = _mm512_shuffle_epi8(absv, _mm512_and_si512(W, m4));
        const __m512i whi = _mm512_shuffle_epi8(absv, _mm512_and_si512(_mm512_srli_epi16(W, 4), m4));
        const __mmask64 nlo = _mm512_testn_epi8_mask(W, bit3), nhi = _mm512_testn_epi8_mask(W, bit7);
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          const uint8_t* a = Am[m] + act_offset(j, l);
          const __m512i alo = bcast32(a), ahi = bcast32(a + 64);
          const __m512i plo = _mm512_maddubs_epi16(wlo, _mm512_mask_sub_epi8(alo, nlo, zero, alo));
          const __m512i phi = _mm512_maddubs_epi16(whi, _mm512_mask_sub_epi8(ahi, nhi, zero, ahi));
          Slo[m] = dpwssd<kVnni>(Slo[m], plo, sc[s][j]);
          Shi[m] = dpwssd<kVnni>(Shi[m], phi, sc[s][j]);
          // GEMM tiles: keeps the sums chains (GCC otherwise builds spilled trees).
          if constexpr (M > 1) __asm__("" : "+v"(Slo[m]), "+v"(Shi[m]));
        }
      }
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        acc[s][m][l] = _mm512_fmadd_ps(dd[s][m], _mm512_cvtepi32_ps(Slo[m]), acc[s][m][l]);
        acc[s][m][l + 4] = _mm512_fmadd_ps(dd[s][m], _mm512_cvtepi32_ps(Shi[m]), acc[s][m][l + 4]);
      }
    }
  }
}

// S groups (gbytes apart) x M activation rows -> y[m * ldy + 16 s + 0..15]:
// the GEMM tiles and the one-group GEMV (S = 1), the decode GEMV's
// multi-stream step (S = kX16Streams, M = 1).
template <bool kVnni, int S, int M>
CHIMERA_T_X16 void iq4_run(const uint8_t* G, size_t gbytes, const uint8_t* A, size_t a_stride, int64_t nsb, float* y,
                           int64_t ldy, size_t pf) {
  __m512 acc[S][M][8];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[s][m][l] = _mm512_setzero_ps();
    }
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + s * gbytes + (size_t)sb * kBlock;
    if constexpr (S == 1 && M == 1) gemv_prefetch_ahead<kBlock, kPfX16>(Bs[0], G + (size_t)nsb * kBlock);
    // GEMM tiles: the same block of the next group into L2 (as the Q4_K tiles,
    // matmul_kquant_x16_q4_avx512.cpp: else the first tile of a group waits on DRAM).
    if constexpr (S == 1 && M > 1) gemv_prefetch_l2(Bs[0] + (size_t)nsb * kBlock, kBlock);
    const uint8_t* Am[M];
    float dy[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      Am[m] = A + (size_t)m * a_stride + (size_t)sb * kAb;
      std::memcpy(&dy[m], Am[m], 4);
    }
    iq4_block<kVnni, S, M>(Bs, Am, dy, acc, S > 1 ? gemv_step_pf<true>(sb, nsb, pf, kBlock) : 0);
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      const __m512* a = acc[s][m];
      const __m512 v = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                                     _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
      _mm512_storeu_ps(y + m * ldy + kX16Rows * s, v);
    }
  }
}

template <bool kVnni, int M>
CHIMERA_T_X16 void iq4_tile(const uint8_t* G, const uint8_t* A, size_t a_stride, int64_t nsb, float* y, int64_t ldy) {
  iq4_run<kVnni, 1, M>(G, 0, A, a_stride, nsb, y, ldy, 0);
}

template <bool kVnni>
CHIMERA_T_X16 void iq4_gemv(const uint8_t* G, size_t gbytes, const uint8_t* A, int64_t nsb, float* y, size_t pf) {
  iq4_run<kVnni, kX16Streams, 1>(G, gbytes, A, 0, nsb, y, 0, pf);
}

template <bool kVnni>
void iq4_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr KqX16TileFn kTiles[kMaxActs] = {iq4_tile<kVnni, 1>, iq4_tile<kVnni, 2>, iq4_tile<kVnni, 3>,
                                                   iq4_tile<kVnni, 4>};
  kq_x16_run(kTiles, g, r0, r1, i0, i1, iq4_gemv<kVnni>);
}

}  // namespace

GemmFn kq_x16_iq4xs_gemm_avx512(bool vnni) { return vnni ? iq4_gemm<true> : iq4_gemm<false>; }

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_iq4xs_gemm_avx512(bool) { return nullptr; }
}  // namespace chimera::kernels

#endif
