// Packed Q4_0 gemm (layout and arithmetic in matmul_q4_0_repack.h) for
// Isa::kAvx2, Isa::kAvx2Vnni (the AVX2 tiles with the VEX vpdpbusd) and
// Isa::kAvx512Vnni, 256-bit vectors.
//
// Tile: R groups of 8 rows x M activation rows. Per block: one f16 -> f32
// convert of the 8 rows' scales per group; per (group, activation row) the
// int32 accumulator starts at the block's activation bias, then per 32-byte
// code chunk two multiply-adds (low nibbles x activation bytes 4c..4c+3
// broadcast, high nibbles x bytes 16+4c..), vpdpbusd on VNNI; on AVX2 the
// block's 8 vpmaddubsw products summed in int16 (|u * a| pairs <= 2 * 15 *
// 128, so |sum| <= 8 * 3840 < 2^15: exact, no saturation), then one vpmaddwd
// with ones (17 instead of 24 instructions per group x activation row and
// block; the same exact int32 lanes); then one convert, one multiply (d_w x d_a) and one fma
// into the 8 outputs' f32 accumulators, stored directly. Bit-identical to
// q4r::gemm_packed_scalar (tested). AVX2 has 16 vector registers, hence its
// smaller tiles.
#include "kernels/matmul_q4_0_repack.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <array>
#include <cstring>

#include "kernels/avx_vnni.h"
#include "kernels/gemv_prefetch.h"
#include "kernels/matmul_legacy_packed_zmm.h"
#include "kernels/matmul_q_legacy.h"
#include "kernels/matmul_tile.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The GEMV's prefetch distance, in 128-byte code blocks of the same group,
// into L1 (the next tile's scales still go to L2). Session 20, paired A/B on
// Zen 5 (4096 x 4096 cold) against the same block of the next tile into L2:
// AVX2 2 threads 1.01-1.12x (1 thread 1.09x), AVX-512 VNNI 1.01-1.12x;
// 4 blocks 0.88x (AVX2) / 1.15x, 12 blocks 1.02x / 1.12x.
constexpr int64_t kPfNear = 8;
#define CHIMERA_T_Q4R_AVX2 __attribute__((target("avx2,fma,f16c")))
#define CHIMERA_T_Q4R_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

// One tile class per ISA: TARGET is its target attribute, DOT(sum, u, a) its
// exact int32 multiply-add of unsigned codes u and signed activations a.
#define CHIMERA_Q4R_TILE(NAME, TARGET, DOT, I16)                                                                  \
  struct NAME {                                                                                                 \
    template <int R, int M>                                                                                     \
    TARGET static void tile(const GemmArgs& g, int64_t grp, int64_t i) {                                        \
      const int64_t nb = g.k / 32;                                                                              \
      const size_t gbytes = (size_t)kGroup * g.w_stride;                                                        \
      const uint8_t* base = g.w + (size_t)grp * gbytes;                                                         \
      const uint8_t* codes = base + codes_offset(nb);                                                           \
      const __m256i m4 = _mm256_set1_epi8(0x0F);                                                                \
      [[maybe_unused]] const __m256i ones = _mm256_set1_epi16(1);                                               \
      ActView av[M];                                                                                            \
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) av[mm] = act_view(g.a + (size_t)(i + mm) * g.a_stride, g.k); \
      __m256 acc[R][M];                                                                                         \
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {                                                           \
        CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[rr][mm] = _mm256_setzero_ps();                        \
      }                                                                                                         \
      for (int64_t b = 0; b < nb; ++b) {                                                                        \
        __m256i sum[R][M];                                                                                      \
        CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {                                                         \
          const __m256i s0 = x86::bias_total(av[mm], b);                                                  \
          CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) sum[rr][mm] = s0;                                       \
        }                                                                                                       \
        const uint8_t* cb = codes + (size_t)b * 128;                                                            \
        [[maybe_unused]] __m256i p16[R][M];                                                                     \
        if constexpr (I16) {                                                                                    \
          CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {                                                       \
            CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) p16[rr][mm] = _mm256_setzero_si256();                 \
          }                                                                                                     \
        }                                                                                                       \
        if constexpr (M == 1) {                                                                                 \
          CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {                                                       \
            if (b + kPfNear < nb) gemv_step_prefetch<true>(cb + (size_t)rr * gbytes + (size_t)kPfNear * 128, 128); \
            if ((b & 3) == 0) _mm_prefetch((const char*)(base + (size_t)(R + rr) * gbytes + 16 * b), _MM_HINT_T1); \
          }                                                                                                     \
        }                                                                                                       \
        CHIMERA_UNROLL for (int c = 0; c < 4; ++c) {                                                            \
          __m256i alo[M], ahi[M];                                                                               \
          CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {                                                       \
            alo[mm] = x86::bcast4(av[mm].qs + 32 * b + 4 * c);                                                       \
            ahi[mm] = x86::bcast4(av[mm].qs + 32 * b + 16 + 4 * c);                                                  \
          }                                                                                                     \
          CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {                                                       \
            const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cb + rr * gbytes + 32 * c)); \
            const __m256i lo = _mm256_and_si256(wv, m4);                                                        \
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m4);                                  \
            CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {                                                     \
              if constexpr (I16) {                                                                              \
                p16[rr][mm] = _mm256_add_epi16(p16[rr][mm], _mm256_maddubs_epi16(lo, alo[mm]));                 \
                p16[rr][mm] = _mm256_add_epi16(p16[rr][mm], _mm256_maddubs_epi16(hi, ahi[mm]));                 \
                __asm__("" : "+x"(p16[rr][mm])); /* keeps the sum a chain (no spilled tree) */                  \
              } else {                                                                                          \
                sum[rr][mm] = DOT(sum[rr][mm], lo, alo[mm]);                                                    \
                sum[rr][mm] = DOT(sum[rr][mm], hi, ahi[mm]);                                                    \
              }                                                                                                 \
            }                                                                                                   \
          }                                                                                                     \
        }                                                                                                       \
        if constexpr (I16) {                                                                                    \
          CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {                                                       \
            CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm)                                                       \
              sum[rr][mm] = _mm256_add_epi32(sum[rr][mm], _mm256_madd_epi16(p16[rr][mm], ones));               \
          }                                                                                                     \
        }                                                                                                       \
        x86::packed_block_fma(base, gbytes, b, av, sum, acc);                                                   \
      }                                                                                                         \
      x86::packed_store(g, grp, i, acc);                                                                        \
    }                                                                                                           \
  };

namespace chimera::kernels::legacy::q4r {
namespace {

#define CHIMERA_Q4R_DOT_AVX2(s, u, a) _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), ones))
#define CHIMERA_Q4R_DOT_VNNI(s, u, a) _mm256_dpbusd_epi32(s, u, a)
#define CHIMERA_Q4R_DOT_AVXVNNI(s, u, a) avxvnni::dpbusd(s, u, a)
CHIMERA_Q4R_TILE(Avx2, CHIMERA_T_Q4R_AVX2, CHIMERA_Q4R_DOT_AVX2, true)
CHIMERA_Q4R_TILE(AvxVnni, CHIMERA_T_Q4R_AVX2, CHIMERA_Q4R_DOT_AVXVNNI, false)
CHIMERA_Q4R_TILE(Vnni, CHIMERA_T_Q4R_VNNI, CHIMERA_Q4R_DOT_VNNI, false)

// The AVX-512 VNNI GEMM (m > 1) on 512-bit vectors: chunk c of two groups
// per zmm, its nibbles split as in the 256-bit tile (matmul_legacy_packed_zmm.h).
struct Q4Codes {
  static constexpr int kChunks = 4;
  static constexpr size_t kBlockBytes = 128;
  template <int M>
  CHIMERA_T_LZMM static void dot(__m512i (&sum)[M], __m512i wv, const ActView (&av)[M], int64_t b, int c) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i lo = _mm512_and_si512(wv, m4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(wv, 4), m4);
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      sum[mm] = _mm512_dpbusd_epi32(sum[mm], lo, x16::bcast32(av[mm].qs + 32 * b + 4 * c));
      sum[mm] = _mm512_dpbusd_epi32(sum[mm], hi, x16::bcast32(av[mm].qs + 32 * b + 16 + 4 * c));
    }
  }
};

constexpr int kAvx2Groups = 4, kAvx2Acts = 3;
constexpr std::array<int, kAvx2Acts + 1> kAvx2GroupsFor = {0, 4, 2, 2};
constexpr detail::TileSet<kAvx2Groups, kAvx2Acts> kAvx2Tiles =
    detail::make_tile_set<Avx2, kAvx2Groups, kAvx2Acts>(kAvx2GroupsFor);

// AVX-VNNI: the AVX2 tile shapes (16 ymm registers) with vpdpbusd.
constexpr detail::TileSet<kAvx2Groups, kAvx2Acts> kAvxVnniTiles =
    detail::make_tile_set<AvxVnni, kAvx2Groups, kAvx2Acts>(kAvx2GroupsFor);

constexpr int kVnniGroups = 8, kVnniActs = 3;
constexpr std::array<int, kVnniActs + 1> kVnniGroupsFor = {0, 8, 4, 4};
constexpr detail::TileSet<kVnniGroups, kVnniActs> kVnniTiles =
    detail::make_tile_set<Vnni, kVnniGroups, kVnniActs>(kVnniGroupsFor);

}  // namespace

// The tile machinery works in groups of 8 rows (r0, r1 are multiples of 8).
void gemm_packed_avx2(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  detail::gemm_blocked(kAvx2Tiles, g, r0 / kGroup, r1 / kGroup, i0, i1);
}

void gemm_packed_avx2vnni(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  detail::gemm_blocked(kAvxVnniTiles, g, r0 / kGroup, r1 / kGroup, i0, i1);
}

void gemm_packed_avx512vnni(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  if (i1 - i0 == 1) detail::gemm_blocked(kVnniTiles, g, r0 / kGroup, r1 / kGroup, i0, i1);
  else detail::gemm_blocked(zmm::kTiles<Q4Codes>, g, r0 / kGroup, r1 / kGroup, i0, i1);
}

}  // namespace chimera::kernels::legacy::q4r

#endif
