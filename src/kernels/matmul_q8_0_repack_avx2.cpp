// Packed Q8_0 gemm (layout and arithmetic in matmul_q8_0_repack.h),
// Isa::kAvx2 (also Isa::kAvx512, which uses the AVX2 legacy kernels) and
// Isa::kAvx2Vnni (gemm_packed_avx2vnni: the same tiles with the VEX vpdpbusd).
//
// Without VNNI the unsigned codes u = w + 128 cannot go into vpmaddubsw
// directly (|u0 a0 + u1 a1| up to 2 * 255 * 127 saturates int16), so each
// 32-byte code chunk (4 elements of 8 rows) is turned back into signed w
// (u ^ 0x80) and |w| once per tile row and reused by the tile's activation
// rows: vpmaddubsw(|w|, sign(a, w)) = the products w * a pairwise (|pair| <=
// 2 * 128 * 127 < 2^15, activations |a| <= 127), vpmaddwd(1) sums each row's
// 4 products into its int32 lane. No activation bias is needed (the codes
// are signed again), so each block's 8 chunks give the exact int32 sumi of
// the 8 rows; then one convert, one multiply (d_w x d_a) and one fma into the
// 8 outputs' f32 accumulators, stored directly — per 256 weights x 1
// activation row 35 vector ops plus 16 / M for the code conversion, against
// 48 + 8 / M for the storage-layout kernel (its convert / scale / fma run per
// row and 32 weights). Bit-identical to q8r::gemm_packed_scalar (tested).
//
// Tile: R groups of 8 rows x M activation rows, R * M int32 block sums and
// R * M f32 accumulators in the 16 ymm registers: 4 x 1 (GEMV, with an L1
// prefetch kPfNear blocks ahead in each group), 2 x 2 and 1 x 4
// for GEMM, 1 x 3 for a tail of 3 (2048x2048, m = 256, 1 thread, loaded
// machine: 1 x 3 took 0.5x, 2 x 2 0.7x the storage-layout kernel's time;
// session 14: 1 x 4 shares each chunk's conversion among 4 activation rows,
// 4.5 instead of 4.67 vector ops per 32 weights x 1 activation row, no
// spills; 1 x 5 spills).
#include "kernels/matmul_q8_0_repack.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <cstring>

#include "kernels/avx_vnni.h"
#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_q_legacy.h"
#include "kernels/matmul_tile.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define CHIMERA_T_Q8R_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace chimera::kernels::legacy::q8r {
namespace {
// The GEMV's prefetch distance, in 256-byte code blocks of the same group,
// into L1 (the next tile's scales still go to L2). Session 20, paired A/B on
// Zen 5 (4096 x 4096 cold) against the same block of the next tile into L2:
// 1 / 2 threads 1.13x / 1.13-1.16x (2 threads 40 -> 45 GB/s); 4 blocks
// 1.07x / 1.10x, 8 1.13x / 1.14-1.18x.
constexpr int64_t kPfNear = 6;

using x86::bcast4;

// kVnni (Isa::kAvx2Vnni): the unsigned codes go straight into the VEX
// vpdpbusd, the int32 sums starting at the block's activation bias (the
// AVX-512 VNNI kernel's arithmetic): per 32-byte chunk x activation row
// one vpdpbusd instead of 4 (+ 2 / M for the code conversion), the same
// exact sumi, so the same bits.
template <bool kVnni>
struct Avx2 {
  // R groups starting at group `grp`, M activation rows starting at i.
  template <int R, int M>
  CHIMERA_T_Q8R_AVX2 static void tile(const GemmArgs& g, int64_t grp, int64_t i) {
    const int64_t nb = g.k / 32;
    const size_t gbytes = (size_t)kGroup * g.w_stride;
    const uint8_t* base = g.w + (size_t)grp * gbytes;
    const uint8_t* codes = base + codes_offset(nb);
    [[maybe_unused]] const __m256i flip = _mm256_set1_epi8((char)0x80);
    [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);
    ActView av[M];
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) av[mm] = act_view(g.a + (size_t)(i + mm) * g.a_stride, g.k);
    __m256 acc[R][M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[rr][mm] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m256i sum[R][M];
      if constexpr (kVnni) {
        CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
          const __m256i s0 = x86::bias_total(av[mm], b);
          CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) sum[rr][mm] = s0;
        }
      }
      const uint8_t* cb = codes + (size_t)b * 256;
      if constexpr (M == 1) {
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          if (b + kPfNear < nb) gemv_step_prefetch<true>(cb + (size_t)rr * gbytes + (size_t)kPfNear * 256, 256);
          if ((b & 3) == 0) _mm_prefetch((const char*)(base + (size_t)(R + rr) * gbytes + 16 * b), _MM_HINT_T1);
        }
      }
      CHIMERA_UNROLL for (int c = 0; c < 8; ++c) {
        __m256i a[M];
        CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) a[mm] = bcast4(av[mm].qs + 32 * b + 4 * c);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb + rr * gbytes + 32 * c));
          if constexpr (kVnni) {
            CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) sum[rr][mm] = avxvnni::dpbusd(sum[rr][mm], u, a[mm]);
          } else {
            const __m256i w = _mm256_xor_si256(u, flip);
            const __m256i wabs = _mm256_sign_epi8(w, w);
            CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
              const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a[mm], w)), ones);
              sum[rr][mm] = c == 0 ? p : _mm256_add_epi32(sum[rr][mm], p);
              // Keeps the sums as chains: GCC otherwise reassociates them into
              // trees over all 8 chunks and spills the products to the stack.
              __asm__("" : "+x"(sum[rr][mm]));
            }
          }
        }
      }
      x86::packed_block_fma(base, gbytes, b, av, sum, acc);
    }
    x86::packed_store(g, grp, i, acc);
  }
};

constexpr int kGroups = 4, kActs = 4;
constexpr std::array<int, kActs + 1> kGroupsFor = {0, 4, 2, 1, 1};
template <bool kVnni>
constexpr detail::TileSet<kGroups, kActs> kTiles = detail::make_tile_set<Avx2<kVnni>, kGroups, kActs>(kGroupsFor);

}  // namespace

void gemm_packed_avx2(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  // The tile machinery works in groups of 8 rows (r0, r1 are multiples of 8).
  detail::gemm_blocked(kTiles<false>, g, r0 / kGroup, r1 / kGroup, i0, i1);
}

void gemm_packed_avx2vnni(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  detail::gemm_blocked(kTiles<true>, g, r0 / kGroup, r1 / kGroup, i0, i1);
}

}  // namespace chimera::kernels::legacy::q8r

#endif
