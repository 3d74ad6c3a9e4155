// AVX2 IQ4_XS kernel over the x16 layout (matmul_kquant_x16.h): each 64-byte
// chunk of a group block is two 256-bit halves (rows 0..7, rows 8..15), so a
// tile is 8 weight rows (one per 32-bit lane) x M <= 3 activation rows, and
// both tiles of a group run per super-block (one pass over the group). The
// decode GEMV reads kX16StreamsAvx2 groups at once (iq4_block,
// gemv_prefetch.h).
//
// Keeps matmul_iq4xs.h's arithmetic lane for lane (bit-identical to the
// scalar and storage AVX2 kernels): qs chunk 4j + l' holds the index bytes
// qs[16j + 4l' ..] of each row, whose low nibbles are the elements of llama.cpp
// lane l' of sub-block j and whose high nibbles those of lane l' + 4. Per
// chunk: codebook lookup of both nibbles with vpshufb, vpmaddubsw(|w|,
// sign(a, w)) (GEMM) or vpmaddubsw(|a|, sign(w, a)) (GEMV) against one
// broadcast activation dword (|pair| <= 2 * 127 * 127, no saturation),
// vpmaddwd by the (ls_j - 32) word pair -> the exact int32
// S_l' / S_l'+4 of 8 rows. Per super-block the lanes' f32 fma with
// f16(d) * d_a, and at the end finish8's order across the 8 lane vectors.
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_kquant_x16_simd_avx2.h"
#include "kernels/matmul_tile.h"
#include "quant/iq4xs_blocks.h"
#include "quant/kquant_blocks.h"
#include "quant/legacy_blocks.h"

namespace chimera::kernels {
namespace {

using x16a2::bcast32_reg;
using x16a2::load_reg;
using x16a2::load_reg_ps;
using x16a2::madd_mem;
using x16a2::pick_words;

namespace q = chimera::quant;

constexpr size_t kAb = sizeof(q::block_q8_K);
// Group block (matmul_kquant_x16.h): d[16], scales_h[16], scales_l chunk, 32 qs chunks.
constexpr size_t kBlock = kX16Rows * sizeof(q::block_iq4_xs);  // 2176
constexpr size_t kD = 0, kSh = 32, kSl = 64, kQs = 128;
constexpr int kHalfRows = 8;
constexpr int kMaxActs = 3;

// (ls_j - 32, ls_j - 32) word pairs of the 8 rows of half `half` of group
// block B, j = 0..7, from per-byte planes: byte k of a row's dword holds
// nibble k of its scales_h (hn) and ls of sub-block 2k (E) / 2k + 1 (O); one
// vpshufb + vpsubw per j (29 vector ops per tile; per-j shifts took 67).
CHIMERA_T_X16A2_INLINE void iq4_scales(const uint8_t* B, int half, __m256i (&sc)[8]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i x = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(B + kSh + 16 * half)));
  const __m256i hn = _mm256_and_si256(_mm256_or_si256(x, _mm256_slli_epi16(x, 4)), m4);
  const __m256i sl = _mm256_loadu_si256((const __m256i*)(B + kSl + 32 * half));
  const __m256i E = _mm256_or_si256(_mm256_and_si256(sl, m4), _mm256_and_si256(_mm256_slli_epi16(hn, 4), m30));
  const __m256i O =
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(sl, 4), m4), _mm256_and_si256(_mm256_slli_epi16(hn, 2), m30));
  CHIMERA_UNROLL for (int j = 0; j < 8; ++j) {
    sc[j] = _mm256_sub_epi16(_mm256_shuffle_epi8(j % 2 ? O : E, pick_words(j / 2, j / 2)), _mm256_set1_epi16(32));
  }
}

// One super-block of S groups (group block Bs[s]) x M activation rows (Am[m]:
// row m's Q8_K block, scale dy[m]) into acc[s][m][half][0..7]: both 8-row
// halves of every group (rows 0..7 from the low 32 bytes of each chunk, rows
// 8..15 from the high 32; 2 S tiles), so a group's bytes are read once per
// super-block. Per lane l, nibble set n (lane l + 4n) and sub-block j the
// activation dwords are broadcast once for all tiles; the products are
//   M = 1 (the decode GEMV): vpmaddubsw(|a|, sign(w, a)), |a| shared by the tiles,
//   M > 1 (GEMM tiles):      vpmaddubsw(|w|, sign(a, w)), |w| shared by the rows,
// both w * a exactly (|pair| <= 2 * 127 * 127). Loads, chains and order are
// explicit (load_reg, bcast32_reg, madd_mem with the scales on the stack,
// the empty asm pins, a memory barrier per step): GCC's own schedule of the
// previous per-half body loaded each weight vector twice, moved activation
// dwords through the stack and spilled 140-220 vectors per half super-block.
// llvm-mca -mcpu=znver3 per super-block: the 2-group GEMV step 787 (2 x
// 393.7 per half) -> 556 cycles, one group 426 -> 293; vector ALU bound.
// S > 1 (M = 1) is the decode GEMV's multi-stream step (kq_x16_run): the
// groups are interleaved lane by lane (the 8 chunks of one lane l of each
// group in turn), and pf != 0 fetches into L1, per lane, the next 8 qs lines
// (lane l: chunks 8l .. 8l + 7) of the groups pf bytes further (one group
// block: the near policy)
// (gemv_prefetch.h; a prefetch of each lane's own 8 scattered lines cost 2.5x
// in compute, the cache-warm GEMV). Each group's arithmetic is the same for
// every S and M.
template <int S, int M>
CHIMERA_T_X16A2_INLINE void iq4_block(const uint8_t* const (&Bs)[S], const uint8_t* const (&Am)[M],
                                      const float (&dy)[M], __m256 (&acc)[S][M][2][8], size_t pf) {
  constexpr bool kAbsA = M == 1;
  const __m256i values = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)q::kIq4nlValues));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  alignas(32) __m256i sc[S][2][8];
  alignas(32) __m256 dd[S][M][2];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    if (pf) gemv_step_prefetch<true>(Bs[s] + pf, kQs);  // d and the scales
    CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
      const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(Bs[s] + kD + 16 * h)));
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) dd[s][m][h] = _mm256_mul_ps(d8, _mm256_set1_ps(dy[m]));
      iq4_scales(Bs[s], h, sc[s][h]);
    }
  }
  // halves per pass: both (the activation broadcasts shared by 2 S tiles),
  // or at M = 3 one, then the other (else 6 sums, 3 activations and the
  // temporaries exceed the 16 registers)
  constexpr int kH = M >= 3 ? 1 : 2;
  CHIMERA_UNROLL for (int h0 = 0; h0 < 2; h0 += kH)
  CHIMERA_UNROLL for (int l = 0; l < 4; ++l) {
    if (pf && h0 == 0) {
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) gemv_step_prefetch<true>(Bs[s] + kQs + 64 * 8 * l + pf, 64 * 8);
    }
    CHIMERA_UNROLL for (int n = 0; n < 2; ++n) {  // low nibbles (lane l), high (lane l + 4)
      __m256i Sx[S][2][M];
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        CHIMERA_UNROLL for (int h = h0; h < h0 + kH; ++h) {
          CHIMERA_UNROLL for (int m = 0; m < M; ++m) Sx[s][h][m] = _mm256_setzero_si256();
        }
      }
      CHIMERA_UNROLL for (int j = 0; j < 8; ++j) {
        __asm__ volatile("" ::: "memory");  // no loads hoisted across steps
        __m256i a[M], u[M];
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          a[m] = bcast32_reg(Am[m] + 4 + 32 * j + 16 * n + 4 * l);
          if constexpr (kAbsA) u[m] = _mm256_abs_epi8(a[m]);
        }
        CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
          CHIMERA_UNROLL for (int h = h0; h < h0 + kH; ++h) {
            const __m256i W = load_reg(Bs[s] + kQs + 64 * (4 * j + l) + 32 * h);
            const __m256i w = _mm256_shuffle_epi8(values, _mm256_and_si256(n ? _mm256_srli_epi16(W, 4) : W, m4));
            [[maybe_unused]] __m256i aw;
            if constexpr (!kAbsA) aw = _mm256_sign_epi8(w, w);
            CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
              const __m256i p = kAbsA ? _mm256_maddubs_epi16(u[m], _mm256_sign_epi8(w, a[m]))
                                      : _mm256_maddubs_epi16(aw, _mm256_sign_epi8(a[m], w));
              Sx[s][h][m] = _mm256_add_epi32(Sx[s][h][m], madd_mem(p, &sc[s][h][j]));
              __asm__("" : "+x"(Sx[s][h][m]));
            }
          }
        }
      }
      CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          CHIMERA_UNROLL for (int h = h0; h < h0 + kH; ++h) {
            __m256& c = acc[s][m][h][l + 4 * n];
            c = _mm256_fmadd_ps(load_reg_ps(&dd[s][m][h]), _mm256_cvtepi32_ps(Sx[s][h][m]), c);
          }
        }
      }
    }
  }
}

// S groups (gbytes apart) x M activation rows -> y[m * ldy + 16 s + 0..15]:
// the GEMM tiles and the one-group GEMV (S = 1), the decode GEMV's
// multi-stream step (S = kX16StreamsAvx2, M = 1).
template <int S, int M>
CHIMERA_T_X16A2 void iq4_run(const uint8_t* G, size_t gbytes, const uint8_t* A, size_t a_stride, int64_t nsb,
                             float* y, int64_t ldy, size_t pf) {
  __m256 acc[S][M][2][8];
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
        CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[s][m][h][l] = _mm256_setzero_ps();
      }
    }
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* Bs[S];
    CHIMERA_UNROLL for (int s = 0; s < S; ++s) Bs[s] = G + s * gbytes + (size_t)sb * kBlock;
    if constexpr (S == 1 && M == 1) gemv_prefetch_ahead<kBlock, kPfX16>(Bs[0], G + (size_t)nsb * kBlock);  // gemv_prefetch.h
    // GEMM tiles: the same block of the next group into L2 (as the Q4_K tiles,
    // matmul_kquant_x16_q4_avx512.cpp: else the first tile of a group waits on DRAM).
    if constexpr (S == 1 && M > 1) gemv_prefetch_l2(Bs[0] + (size_t)nsb * kBlock, kBlock);
    const uint8_t* Am[M];
    float dy[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      Am[m] = A + (size_t)m * a_stride + (size_t)sb * kAb;
      std::memcpy(&dy[m], Am[m], 4);
    }
    iq4_block<S, M>(Bs, Am, dy, acc, S > 1 ? gemv_step_pf<true>(sb, nsb, pf, kBlock) : 0);
  }
  CHIMERA_UNROLL for (int s = 0; s < S; ++s) {
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
        _mm256_storeu_ps(y + m * ldy + kX16Rows * s + kHalfRows * h, x16a2::lane_sum8(acc[s][m][h]));
      }
    }
  }
}

template <int M>
void iq4_tile16(const uint8_t* G, const uint8_t* A, size_t a_stride, int64_t nsb, float* y, int64_t ldy) {
  iq4_run<1, M>(G, 0, A, a_stride, nsb, y, ldy, 0);
}

void iq4_gemv(const uint8_t* G, size_t gbytes, const uint8_t* A, int64_t nsb, float* y, size_t pf) {
  iq4_run<kX16StreamsAvx2, 1>(G, gbytes, A, 0, nsb, y, 0, pf);
}

void iq4_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr KqX16TileFn kTiles[kMaxActs] = {iq4_tile16<1>, iq4_tile16<2>, iq4_tile16<3>};
  kq_x16_run<kX16StreamsAvx2>(kTiles, g, r0, r1, i0, i1, iq4_gemv);
}

}  // namespace

GemmFn kq_x16_iq4xs_gemm_avx2() { return iq4_gemm; }

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_iq4xs_gemm_avx2() { return nullptr; }
}  // namespace chimera::kernels

#endif
