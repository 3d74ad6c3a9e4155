// Packed Q8_0 gemm (layout and arithmetic in matmul_q8_0_repack.h),
// Isa::kAvx512Vnni (AVX512_VNNI + VL, 256-bit vectors).
//
// Tile: R groups of 8 rows x M activation rows: 4 x 2..3 for GEMM (24
// accumulators; measured best of 4x4/2x4, 4x2, 6x2, 8x1, 4x3 on Zen 4), 8 x 1
// for GEMV (with an L1 prefetch kPfNear blocks ahead in each group). Per block: one f16 -> f32
// convert of the 8 rows' scales per group; per (group, activation row) 8
// vpdpbusd (the group's 32-byte code chunk x the activation's 4 bytes
// broadcast), the int32 accumulator starting at the block's total activation
// bias, then one convert, one multiply (d_w x d_a) and one fma into the 8
// outputs' f32 accumulators, which are stored directly (no horizontal sum).
// Bit-identical to q8r::gemm_packed_scalar (tested).
#include "kernels/matmul_q8_0_repack.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <cstring>

#include "kernels/matmul_legacy_packed_zmm.h"
#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_q_legacy.h"
#include "kernels/matmul_tile.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define CHIMERA_T_Q8R __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace chimera::kernels::legacy::q8r {
namespace {
// The GEMV's prefetch distance, in 256-byte code blocks of the same group,
// into L1. Session 20, paired A/B on Zen 5 (4096 x 4096 cold) against the
// same block of the next tile into L2: 1 / 2 threads 1.27x / 1.26x
// (2 threads 40 -> 51 GB/s); 2 and 6 blocks 1.13-1.19x, 8 1.09-1.12x.
constexpr int64_t kPfNear = 4;

using x86::bcast4;
using x86::bias_total;

struct Vnni {
  // R groups starting at group `grp`, M activation rows starting at i.
  template <int R, int M>
  CHIMERA_T_Q8R static void tile(const GemmArgs& g, int64_t grp, int64_t i) {
    const int64_t nb = g.k / 32;
    const size_t gbytes = (size_t)kGroup * g.w_stride;
    const uint8_t* base = g.w + (size_t)grp * gbytes;
    const uint8_t* codes = base + codes_offset(nb);
    ActView av[M];
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) av[mm] = act_view(g.a + (size_t)(i + mm) * g.a_stride, g.k);
    __m256 acc[R][M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[rr][mm] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m256i sum[R][M];
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m256i s0 = bias_total(av[mm], b);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) sum[rr][mm] = s0;
      }
      const uint8_t* cb = codes + (size_t)b * 256;
      if constexpr (M == 1) {
        // GEMV streams the weights from DRAM: fetch each group's codes
        // kPfNear blocks further into L1 (within the group), and the next
        // tile's scales into L2.
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          if (b + kPfNear < nb) gemv_step_prefetch<true>(cb + (size_t)rr * gbytes + (size_t)kPfNear * 256, 256);
          if ((b & 3) == 0) _mm_prefetch((const char*)(base + (size_t)(R + rr) * gbytes + 16 * b), _MM_HINT_T1);
        }
      }
      CHIMERA_UNROLL for (int c = 0; c < 8; ++c) {
        __m256i a[M];
        CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) a[mm] = bcast4(av[mm].qs + 32 * b + 4 * c);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb + rr * gbytes + 32 * c));
          CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) sum[rr][mm] = _mm256_dpbusd_epi32(sum[rr][mm], wv, a[mm]);
        }
      }
      x86::packed_block_fma(base, gbytes, b, av, sum, acc);
    }
    x86::packed_store(g, grp, i, acc);
  }
};

// The GEMM (m > 1) on 512-bit vectors: chunk c of two groups per zmm
// (matmul_legacy_packed_zmm.h); the codes go straight in.
struct Q8Codes {
  static constexpr int kChunks = 8;
  static constexpr size_t kBlockBytes = 256;
  template <int M>
  CHIMERA_T_LZMM static void dot(__m512i (&sum)[M], __m512i wv, const ActView (&av)[M], int64_t b, int c) {
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm)
      sum[mm] = _mm512_dpbusd_epi32(sum[mm], wv, x16::bcast32(av[mm].qs + 32 * b + 4 * c));
  }
};

constexpr int kGroups = 8, kActs = 3;
constexpr std::array<int, kActs + 1> kGroupsFor = {0, 8, 4, 4};
constexpr detail::TileSet<kGroups, kActs> kTiles = detail::make_tile_set<Vnni, kGroups, kActs>(kGroupsFor);

}  // namespace

void gemm_packed_avx512vnni(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  // The tile machinery works in groups of 8 rows (r0, r1 are multiples of 8).
  if (i1 - i0 == 1) detail::gemm_blocked(kTiles, g, r0 / kGroup, r1 / kGroup, i0, i1);
  else detail::gemm_blocked(zmm::kTiles<Q8Codes>, g, r0 / kGroup, r1 / kGroup, i0, i1);
}

}  // namespace chimera::kernels::legacy::q8r

#endif
