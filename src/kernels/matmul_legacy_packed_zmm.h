// Internal to the matmul kernels: the AVX-512 VNNI GEMM tile (m > 1) of the
// packed 8-row Q8_0 / Q4_0 layouts (matmul_q8_0_repack.h,
// matmul_q4_0_repack.h) on 512-bit vectors. One zmm holds the same code chunk
// of two adjacent 8-row groups (16 rows), so each vpdpbusd does the work of
// two 256-bit ones, and the code decode, the scale convert and the f32
// epilogue run once per 16 rows. R groups = (R + 1) / 2 zmm per chunk, the
// last one half-filled (upper 8 lanes zero, not stored) when R is odd.
//
// Per output lane the arithmetic of the 256-bit tiles: the int32 sum starts
// at the block's total activation bias and adds the same exact byte products,
// then acc = fma((float)sum, d_w * d_a, acc) per block in order, so the
// result is bit-identical to the scalar reference of the layout.
//
// Codes (the layout's chunks): kChunks per 32-element block, kBlockBytes of
// codes per block and group, and
//   template <int M> static void dot(__m512i (&sum)[M], __m512i w, const ActView (&av)[M], int64_t b, int c)
// adding chunk c's products of block b for M activation rows.
#pragma once

#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <cstdint>

#include "kernels/matmul_kquant_x16_simd.h"  // x16::bcast32, and the GCC 12 warning pragmas
#include "kernels/matmul_q_legacy.h"
#include "kernels/matmul_tile.h"

#define CHIMERA_T_LZMM __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace chimera::kernels::legacy::zmm {

template <class Codes>
struct PackedTile {
  static constexpr int kGroupRows = 8;

  // R groups starting at group `grp`, M activation rows starting at i.
  template <int R, int M>
  CHIMERA_T_LZMM static void tile(const GemmArgs& g, int64_t grp, int64_t i) {
    constexpr int P = (R + 1) / 2;
    const int64_t nb = g.k / 32;
    const size_t gbytes = (size_t)kGroupRows * g.w_stride;
    const uint8_t* base = g.w + (size_t)grp * gbytes;
    const uint8_t* codes = base + (size_t)nb * 16;  // after the f16 scales d[nb][8]
    ActView av[M];
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) av[mm] = act_view(g.a + (size_t)(i + mm) * g.a_stride, g.k);
    __m512 acc[P][M];
    CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[p][mm] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m512i sum[P][M];
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m512i s0 = _mm512_set1_epi32(block_bias_total(av[mm], b));
        CHIMERA_UNROLL for (int p = 0; p < P; ++p) sum[p][mm] = s0;
      }
      const uint8_t* cb = codes + (size_t)b * Codes::kBlockBytes;
      CHIMERA_UNROLL for (int c = 0; c < Codes::kChunks; ++c) {
        CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
          const uint8_t* w0 = cb + (size_t)(2 * p) * gbytes + 32 * c;
          const __m256i w_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0));
          const __m512i wv =
              2 * p + 1 < R
                  ? _mm512_inserti64x4(_mm512_castsi256_si512(w_lo),
                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + gbytes)), 1)
                  : _mm512_zextsi256_si512(w_lo);
          Codes::template dot<M>(sum[p], wv, av, b, c);
        }
      }
      CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
        const uint8_t* s0 = base + (size_t)(2 * p) * gbytes + 16 * b;
        const __m128i h_lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0));
        const __m256i h =
            2 * p + 1 < R ? _mm256_inserti128_si256(_mm256_castsi128_si256(h_lo),
                                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + gbytes)), 1)
                          : _mm256_zextsi128_si256(h_lo);
        const __m512 dw = _mm512_cvtph_ps(h);
        CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
          const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(av[mm].dexp[8 * b]));
          acc[p][mm] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[p][mm]), scale, acc[p][mm]);
        }
      }
    }
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      CHIMERA_UNROLL for (int p = 0; p < P; ++p) {
        float* y = g.y + (i + mm) * g.ldy + (grp + 2 * p) * kGroupRows;
        if (2 * p + 1 < R) _mm512_storeu_ps(y, acc[p][mm]);
        else _mm512_mask_storeu_ps(y, (__mmask16)0x00FF, acc[p][mm]);
      }
    }
  }
};

// Tile shapes (groups of 8 rows x activation rows), measured on Zen 5 for
// Q4_0 at m = 8 and 256 against 6 x 4, 4 x 6, 4 x 8 and 8 x {8, 6, 6}.
constexpr int kMaxGroups = 8, kMaxActs = 4;
constexpr std::array<int, kMaxActs + 1> kGroupsFor = {0, 8, 8, 4, 4};

template <class Codes>
constexpr detail::TileSet<kMaxGroups, kMaxActs> kTiles =
    detail::make_tile_set<PackedTile<Codes>, kMaxGroups, kMaxActs>(kGroupsFor);

}  // namespace chimera::kernels::legacy::zmm

#endif
