// AVX-512 Q4_K / Q5_K kernels over the x16 layout (matmul_kquant_x16.h):
// GEMV and GEMM in tiles of 16 weight rows (one per 32-bit lane) x M
// activation rows, straight from the packed bytes (no decoded panel). The
// decode GEMV reads kX16Streams groups at once, chunk-interleaved, with an L1
// prefetch of each group's next super-block (kq_x16_run, gemv_prefetch.h): q4_block with
// S = kX16Streams, M = 1; the GEMM tiles and leftover groups are S = 1.
// Q5_K adds the fifth bit of each level from its qh chunks, and its levels
// (<= 31) always take the int16 path below (a 16-element vpdpbusd sum could
// exceed the int16 range vpdpwssd needs).
//
// Arithmetic (the x16 Q4_K contract of matmul_kquant_x16.h, bit-identical to
// kq_x16_dot_ref): per super-block and sub-block j, each 16-element half
// is summed by vpdpbusd (4 chunks: nibbles of 4 elements x one broadcast
// activation dword, |P| <= 16 * 15 * 127 < 2^15), and the two halves enter
// S += sc_j * P by vpdpwssd with the scale zero-extended to a (sc_j, 0) word
// pair — 10 multiply-class instructions per 512 MACs instead of the 16 of
// vpmaddubsw + vpdpwssd — then one f32 update per super-block:
// acc = fma(dy * d, S, acc), accm = fma(-dy * dmin, Bm, accm), y = acc + accm.
// Plain AVX-512 (no VNNI) sums vpmaddubsw pairs in int16 and applies the
// scale with vpmaddwd: the same exact integers, so the same bits.
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include <algorithm>
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
// Group-block geometry (matmul_kquant_x16.h): size, qh chunks, qs chunks.
template <bool kQ5>
struct Geo {
  static constexpr size_t kBlock = kX16Rows * (kQ5 ? sizeof(q::block_q5_K) : sizeof(q::block_q4_K));
  static constexpr size_t kQh = 256;
  static constexpr size_t kQs = kQ5 ? 768 : 256;
};
constexpr int kMaxActs = 8;
// Tiles of more activation rows than this take the halves of a chunk in two
// passes (q4_block).
constexpr int kOnePassActs = 4;

// Partial sums P of 4 x 4 elements per row: VNNI vpdpbusd into int32 lanes;
// plain AVX-512 vpmaddubsw pairs summed in int16 (|.| <= 4 * 2 * 15 * 128 <
// 2^15, exact). VNNI instructions by inline asm so the plain AVX-512
// instantiation of the shared body never uses them.
template <bool kDpbusd>
CHIMERA_T_X16_INLINE __m512i psum(__m512i s, __m512i u8, __m512i s8) {
  if constexpr (kDpbusd) {
    return x16::dpbusd(s, u8, s8);
  } else {
    return _mm512_add_epi16(s, _mm512_maddubs_epi16(u8, s8));
  }
}
// Per byte: bit b moved to bit 4 (the fifth bit of a Q5_K level).
CHIMERA_T_X16_INLINE __m512i bit_to_4(__m512i h, int b) {
  const __m512i m = _mm512_set1_epi8(0x10);
  return b <= 4 ? _mm512_and_si512(_mm512_slli_epi16(h, 4 - b), m) : _mm512_and_si512(_mm512_srli_epi16(h, b - 4), m);
}

// One super-block of S groups (group block Bs[s]) x M activation rows (Am[m]:
// row m's Q8_K block, scale dy[m]) into acc[s][m] / accm[s][m]. S > 1 (with
// M = 1) is the decode GEMV's multi-stream step (kq_x16_run): the groups are
// interleaved chunk by chunk (the 4 header lines of each group, then 4 qs
// lines — and for Q5_K the 4 qh lines they need — of each group in turn), and
// pf != 0 fetches the same chunks of the groups pf bytes further (one group
// block: the near policy of gemv_prefetch.h). Each group's arithmetic is the same for every S.
template <bool kVnni, bool kQ5, int S, int M>
CHIMERA_T_X16_INLINE void q4_block(const uint8_t* const* Bs, const uint8_t* const* Am, const float (&dy)[M],
                                   __m512 (&acc)[S][M], __m512 (&accm)[S][M], size_t pf) {
  using GB = Geo<kQ5>;
  constexpr bool kDpbusd = kVnni && !kQ5;  // else int16 pair sums
  constexpr bool kHalves = S == 1 && M > kOnePassActs;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m6 = _mm512_set1_epi8(0x3F);
  __m512i O0[S], O1[S];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const uint8_t* B = Bs[s];
    if (pf) gemv_step_prefetch<true>(B + pf, 256);  // d, dmin and the scale planes
    const __m512 dmin16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)(B + 32)));
    const __m512i X0 = _mm512_load_si512(B + 64), X1 = _mm512_load_si512(B + 128), X2 = _mm512_load_si512(B + 192);
    {
      // mins: Bm = sum_j m_j * bsp_j, bsp_j = the activations' sub-block sums
      const __m512i O2 = _mm512_and_si512(X2, m6);
      const __m512i O3 = _mm512_or_si512(
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(X0, 6), _mm512_set1_epi8(0x03)),
                          _mm512_and_si512(_mm512_srli_epi16(X1, 4), _mm512_set1_epi8(0x0C))),
          _mm512_and_si512(_mm512_srli_epi16(X2, 2), _mm512_set1_epi8(0x30)));
      __m512i Mk[4];
      CHIMERA_UNROLL for (int k = 0; k < 4; ++k) {
        Mk[k] = _mm512_shuffle_epi8(k < 2 ? O2 : O3, pick_words(2 * (k % 2), 2 * (k % 2) + 1));
      }
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        const __m512i bp = _mm512_broadcast_i32x4(_mm_hadd_epi16(_mm_loadu_si128((const __m128i*)(Am[m] + 260)),
                                                                 _mm_loadu_si128((const __m128i*)(Am[m] + 276))));
        // Literal shuffle immediates: a loop index is a constant only after
        // unrolling, which -O1 (the sanitizer build) does not do in time.
        __m512i Bm = _mm512_madd_epi16(Mk[0], _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)0x00));
        Bm = dpwssd<kVnni>(Bm, Mk[1], _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)0x55));
        Bm = dpwssd<kVnni>(Bm, Mk[2], _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)0xAA));
        Bm = dpwssd<kVnni>(Bm, Mk[3], _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)0xFF));
        const __m512 dmv = _mm512_mul_ps(_mm512_set1_ps(-dy[m]), dmin16);
        accm[s][m] = _mm512_fmadd_ps(dmv, _mm512_cvtepi32_ps(Bm), accm[s][m]);
      }
    }
    O0[s] = _mm512_and_si512(X0, m6);
    O1[s] = _mm512_and_si512(X1, m6);
  }
  __m512i Sx[S][M];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) Sx[s][m] = _mm512_setzero_si512();
  }
  CHIMERA_UNROLL for (int c = 0; c < 4; ++c) {
    CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        const uint8_t* B = Bs[s];
        const uint8_t* qs = B + GB::kQs + 64 * (8 * c + 4 * h);
        if (pf) {
          gemv_step_prefetch<true>(qs + pf, 4 * 64);
          if (kQ5 && c == 0) gemv_step_prefetch<true>(B + GB::kQh + 64 * 4 * h + pf, 4 * 64);
        }
        // Scales of sub-blocks 2c (low nibbles) and 2c + 1 (high) per row: the
        // word pair (sc_j, 0) against VNNI's int32 P, (sc_j, sc_j) against the
        // int16 pair sums.
        const __m512i O = c < 2 ? O0[s] : O1[s];
        const __m512i SClo = _mm512_shuffle_epi8(O, pick_words((2 * c) % 4, kDpbusd ? -1 : (2 * c) % 4));
        const __m512i SChi = _mm512_shuffle_epi8(O, pick_words((2 * c + 1) % 4, kDpbusd ? -1 : (2 * c + 1) % 4));
        // Tall tiles (kHalves): the low-nibble and the high-nibble halves in
        // two passes over the 4 lines (reloaded from L1), so only M partial
        // sums are live besides the M totals; else both halves in one pass.
        CHIMERA_UNROLL for (int pass = 0; pass < (kHalves ? 2 : 1); ++pass) {
          const bool do_lo = !kHalves || pass == 0, do_hi = !kHalves || pass == 1;
          __m512i Plo[M], Phi[M];
          CHIMERA_UNROLL for (int m = 0; m < M; ++m) Plo[m] = Phi[m] = _mm512_setzero_si512();
          CHIMERA_UNROLL for (int l = 4 * h; l < 4 * h + 4; ++l) {
            const __m512i W = _mm512_load_si512(qs + 64 * (l - 4 * h));
            __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
            if (do_lo) lo = _mm512_and_si512(W, m4);
            if (do_hi) hi = _mm512_and_si512(_mm512_srli_epi16(W, 4), m4);
            if constexpr (kQ5) {
              // qh byte 4l + u of each row: bit 2c -> low-nibble level, 2c + 1 -> high
              const __m512i H = _mm512_load_si512(B + GB::kQh + 64 * l);
              if (do_lo) lo = _mm512_or_si512(lo, bit_to_4(H, 2 * c));
              if (do_hi) hi = _mm512_or_si512(hi, bit_to_4(H, 2 * c + 1));
            }
            CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
              const uint8_t* a = Am[m] + 4 + 64 * c + 4 * l;
              if constexpr (kDpbusd) {
                if (do_lo) Plo[m] = x16::dpbusd_bcast(Plo[m], lo, a);
                if (do_hi) Phi[m] = x16::dpbusd_bcast(Phi[m], hi, a + 32);
              } else {
                if (do_lo) Plo[m] = psum<false>(Plo[m], lo, bcast32(a));
                if (do_hi) Phi[m] = psum<false>(Phi[m], hi, bcast32(a + 32));
              }
            }
          }
          CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
            if (do_lo) Sx[s][m] = dpwssd<kVnni>(Sx[s][m], Plo[m], SClo);
            if (do_hi) Sx[s][m] = dpwssd<kVnni>(Sx[s][m], Phi[m], SChi);
          }
        }
      }
    }
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    const __m512 d16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)Bs[s]));
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      acc[s][m] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(dy[m]), d16), _mm512_cvtepi32_ps(Sx[s][m]), acc[s][m]);
    }
  }
}

// S groups (gbytes apart) x M activation rows (A, a_stride apart) ->
// y[m * ldy + 16 s + 0..15]: the GEMM tiles (S = 1) and the decode GEMV's
// multi-stream step (M = 1).
template <bool kVnni, bool kQ5, int S, int M>
CHIMERA_T_X16 void q4_run(const uint8_t* G, size_t gbytes, const uint8_t* A, size_t a_stride, int64_t nsb, float* y,
                          int64_t ldy, size_t pf) {
  using GB = Geo<kQ5>;
  __m512 acc[S][M], accm[S][M];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      acc[s][m] = _mm512_setzero_ps();
      accm[s][m] = _mm512_setzero_ps();
    }
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + s * gbytes + (size_t)sb * GB::kBlock;
    if constexpr (S == 1 && M == 1) gemv_prefetch_ahead<GB::kBlock, kPfX16>(Bs[0], G + (size_t)nsb * GB::kBlock);
    // GEMM tiles: the block kPfTileQ45 further into L1 (gemv_prefetch.h; the
    // group blocks of a packed tensor are contiguous, so near a group's end
    // that is the next group's first blocks). Without a prefetch the first
    // tile of a group waits on DRAM: 8192 x 2048, m = 4, 1 thread, cold
    // weights 2x the time of cache-warm ones (Zen 5). Past the tensor's last
    // group this prefetches bytes it never reads (a prefetch does not fault).
    if constexpr (S == 1 && M > 1) gemv_step_prefetch<true>(Bs[0] + kPfTileQ45 * GB::kBlock, GB::kBlock);
    const uint8_t* Am[M];
    float dy[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      Am[m] = A + (size_t)m * a_stride + (size_t)sb * kAb;
      std::memcpy(&dy[m], Am[m], 4);
    }
    q4_block<kVnni, kQ5, S, M>(Bs, Am, dy, acc, accm, S > 1 ? gemv_step_pf<true>(sb, nsb, pf, GB::kBlock) : 0);
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      _mm512_storeu_ps(y + m * ldy + kX16Rows * s, _mm512_add_ps(acc[s][m], accm[s][m]));
    }
  }
}

template <bool kVnni, bool kQ5, int M>
CHIMERA_T_X16 void q4_tile(const uint8_t* G, const uint8_t* A, size_t a_stride, int64_t nsb, float* y, int64_t ldy) {
  q4_run<kVnni, kQ5, 1, M>(G, 0, A, a_stride, nsb, y, ldy, 0);
}

template <bool kVnni, bool kQ5>
CHIMERA_T_X16 void q4_gemv(const uint8_t* G, size_t gbytes, const uint8_t* A, int64_t nsb, float* y, size_t pf) {
  q4_run<kVnni, kQ5, kX16Streams, 1>(G, gbytes, A, 0, nsb, y, 0, pf);
}

template <bool kVnni, bool kQ5>
void q4_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr KqX16TileFn kTiles[kMaxActs] = {q4_tile<kVnni, kQ5, 1>, q4_tile<kVnni, kQ5, 2>,
                                                   q4_tile<kVnni, kQ5, 3>, q4_tile<kVnni, kQ5, 4>,
                                                   q4_tile<kVnni, kQ5, 5>, q4_tile<kVnni, kQ5, 6>,
                                                   q4_tile<kVnni, kQ5, 7>, q4_tile<kVnni, kQ5, 8>};
  kq_x16_run(kTiles, g, r0, r1, i0, i1, q4_gemv<kVnni, kQ5>);
}

}  // namespace

GemmFn kq_x16_gemm_avx512(GgmlType type, bool vnni) {
  switch (type) {
    case GgmlType::Q4_K: return vnni ? q4_gemm<true, false> : q4_gemm<false, false>;
    case GgmlType::Q5_K: return vnni ? q4_gemm<true, true> : q4_gemm<false, true>;
    case GgmlType::Q6_K: return kq_x16_q6_gemm_avx512(vnni);
    case GgmlType::Q2_K:
    case GgmlType::Q3_K: return kq_x16_q23_gemm_avx512(type, vnni);
    case GgmlType::IQ4_XS: return kq_x16_iq4xs_gemm_avx512(vnni);
    default: return nullptr;
  }
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_gemm_avx512(format::GgmlType, bool) { return nullptr; }
}  // namespace chimera::kernels

#endif
