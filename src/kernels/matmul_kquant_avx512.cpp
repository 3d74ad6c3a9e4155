// AVX-512 K-quant matmul kernels: Isa::kAvx512 (F/BW/DQ/VL) and
// Isa::kAvx512Vnni (vpdpwssd) for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights x Q8_K
// activations (ggml block_q8_K layout).
//
// GEMV (m == 1): a fused path (gemv_fused) unpacks Q4_K / Q5_K / Q6_K
// straight from storage in registers, 4 rows at a time sharing the activation
// loads, with an L2 prefetch of the next row group; same integer sums and f32
// operation order as the tiles below, so bit-identical.
// Layout: as the AVX2 kernels, a panel of up to 4 weight rows is decoded once
// into KqDecoded (matmul_kquant.h) by the AVX2 decoders and reused by every
// activation tile. Tiles of R rows x M activations (R, M <= 4; 16 zmm
// accumulators) walk 64-element chunks: vpmaddubsw(levels u8 <= 63,
// activations s8) -> int16 pairs (no saturation), then the chunk's scales
// ([sc_4c x8 | sc_4c+1 x8 | sc_4c+2 x8 | sc_4c+3 x8], one vpermw of the
// decoded int16 scales) applied and accumulated by vpmaddwd + vpaddd, or by
// one vpdpwssd on VNNI. Precision: the 16 int32 lanes are exact; lanes l and
// l+8 are added to give the AVX2 lane l, then f32 exactly as the AVX2 kernel
// (matmul_kquant.h), so results are bit-identical to Isa::kScalar and
// Isa::kAvx2. Tolerance: matmul_kquant.h.
// Per-super-block epilogue: Q4_K's mins come from the 8 per-32 mins times the
// activations' pair-summed bsums (as the fused GEMV); for Q4_K and the
// no-min offset types (Q3_K, Q6_K) with an even tile width, two activations'
// f32 lanes share one register. Same int32 values, same f32 operations lane
// for lane: the bits above are unchanged.
// Load-time repacking (gemm_packed): every K-quant into the x16 layout with
// kernels of their own (matmul_kquant_x16.h); the 4-row interleaved layout
// (matmul_kquant.h) that the panel path decodes from its new addresses is
// kept for a type without x16 kernels (none at present).
#include "kernels/matmul_kquant.h"

#if defined(__x86_64__)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/matmul_tile.h"

#define CHIMERA_T_KQ512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define CHIMERA_T_KQ512_INLINE \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) inline

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

// vpermw indices: lane j of chunk c takes scale 4c + j/8.
alignas(64) constexpr int16_t kScaleIdx[4][32] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13,
     14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

// Exact horizontal sum of 8 int32 lanes.
CHIMERA_T_KQ512_INLINE int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
}

// One super-block's f32 update of one output (matmul_kquant.h), as the AVX2 kernel.
CHIMERA_T_KQ512_INLINE void kq_update(KqMin min, float d, float dm, __m256i S, __m256i B, __m256& acc,
                                      __m128& accm, float& summs) {
  if (min == KqMin::kLanes8) {
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dm), _mm256_cvtepi32_ps(B), acc);
  } else if (min == KqMin::kLanes4) {
    const __m128i b4 = _mm_hadd_epi32(_mm256_castsi256_si128(B), _mm256_extracti128_si256(B, 1));
    accm = _mm_fmadd_ps(_mm_set1_ps(dm), _mm_cvtepi32_ps(b4), accm);
  } else if (min == KqMin::kSum) {
    summs = std::fma(dm, (float)hsum_i32(B), summs);
  }
  acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(S), acc);
}

// Lanes l and l+8 of a 64-element chunk's vpmaddwd hold elements 4l..4l+3 of
// its two 32-element halves: their sum is the AVX2 lane l.
CHIMERA_T_KQ512_INLINE __m256i fold256(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

template <bool kVnni>
struct Acc;
template <>
struct Acc<false> {
  static CHIMERA_T_KQ512_INLINE __m512i step(__m512i s, __m512i p16, __m512i sc) {
    return _mm512_add_epi32(s, _mm512_madd_epi16(p16, sc));
  }
};
// vpdpwssd (AVX512_VNNI) via inline asm, so the tile body can be shared with
// the plain AVX-512 kernel (a VNNI target attribute would let the compiler use
// VNNI in the kAvx512 kernel too).
template <>
struct Acc<true> {
  static CHIMERA_T_KQ512_INLINE __m512i step(__m512i s, __m512i p16, __m512i sc) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(s) : "v"(p16), "v"(sc));
    return s;
  }
};

// kQ4: Q4_K's mins (kLanes4) from the per-32 mins and the activations'
// pair-summed bsums, shared by the rows / activations of the tile (the fused
// GEMV's way; the same exact int32 B_2k + B_2k+1, so the same bits).
template <int R, int M, bool kOffset, bool kVnni, bool kQ4 = false>
CHIMERA_T_KQ512 void tile(const KqDecoded* dec, const float* dd, int64_t nsb, const KqTypeInfo& t, const GemmArgs& g,
                          int64_t r, int64_t i) {
  constexpr size_t kAb = sizeof(q::block_q8_K);
  const __m512i offv = _mm512_set1_epi8((char)t.offset);
  const KqMin min = t.min;
  const uint8_t* a0 = g.a + (size_t)i * g.a_stride;
  __m256 acc[R * M];
  __m128 accm[R * M];
  float summs[R * M];
  CHIMERA_UNROLL for (int o = 0; o < R * M; ++o) {
    acc[o] = _mm256_setzero_ps();
    accm[o] = _mm_setzero_ps();
    summs[o] = 0.f;
  }
  // kPair (Q4_K and the no-min offset types, M even): the f32 state of
  // activations 2p and 2p+1 of a row shares one zmm (8 lanes each; Q4_K's 4
  // min lanes one ymm), halving the per-super-block epilogue and the
  // accumulator registers. Lane for lane the same operations: same bits.
  constexpr bool kPair = (kQ4 || kOffset) && M % 2 == 0;
  constexpr int kP = kPair ? R * M / 2 : 1;
  __m512 acc2[kP];
  __m256 accm2[kP];
  CHIMERA_UNROLL for (int o = 0; o < kP; ++o) {
    acc2[o] = _mm512_setzero_ps();
    accm2[o] = _mm256_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const KqDecoded* D[R];
    const uint8_t* A[M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) D[rr] = dec + rr * nsb + sb;
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) A[mm] = a0 + mm * g.a_stride + sb * kAb;
    __m512i s[R * M];
    CHIMERA_UNROLL for (int o = 0; o < R * M; ++o) s[o] = _mm512_setzero_si512();
    CHIMERA_UNROLL for (int c = 0; c < 4; ++c) {
      const __m512i idx = _mm512_load_si512(kScaleIdx[c]);
      __m512i w[R], sc[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        w[rr] = _mm512_load_si512(D[rr]->q + 64 * c);
        sc[rr] = _mm512_permutexvar_epi16(idx, _mm512_load_si512(D[rr]->sc));
      }
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m512i av = _mm512_loadu_si512(A[mm] + 4 + 64 * c);
        __m512i os = _mm512_setzero_si512();
        if constexpr (kOffset) os = _mm512_maddubs_epi16(offv, av);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          __m512i p = _mm512_maddubs_epi16(w[rr], av);
          if constexpr (kOffset) p = _mm512_sub_epi16(p, os);
          s[rr * M + mm] = Acc<kVnni>::step(s[rr * M + mm], p, sc[rr]);
        }
      }
    }
    if constexpr (kPair) {
      [[maybe_unused]] __m256i mins16[R];
      if constexpr (kQ4) {
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          const __m256i v =
              _mm256_and_si256(_mm256_load_si256((const __m256i*)D[rr]->bc), _mm256_set1_epi32(0xFFFF));
          const __m128i m8 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
          mins16[rr] = _mm256_set_m128i(m8, m8);
        }
      }
      CHIMERA_UNROLL for (int pp = 0; pp < M / 2; ++pp) {
        float dy0, dy1;
        std::memcpy(&dy0, A[2 * pp], 4);
        std::memcpy(&dy1, A[2 * pp + 1], 4);
        const __m512 dyv = _mm512_insertf32x8(_mm512_set1_ps(dy0), _mm256_set1_ps(dy1), 1);
        [[maybe_unused]] __m256 ndyv;
        [[maybe_unused]] __m256i bsp;
        if constexpr (kQ4) {
          ndyv = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(-dy0)), _mm_set1_ps(-dy1), 1);
          const __m128i b0 = _mm_hadd_epi16(_mm_loadu_si128((const __m128i*)(A[2 * pp] + 260)),
                                            _mm_loadu_si128((const __m128i*)(A[2 * pp] + 276)));
          const __m128i b1 = _mm_hadd_epi16(_mm_loadu_si128((const __m128i*)(A[2 * pp + 1] + 260)),
                                            _mm_loadu_si128((const __m128i*)(A[2 * pp + 1] + 276)));
          bsp = _mm256_set_m128i(b1, b0);
        }
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          const int o0 = rr * M + 2 * pp, o1 = o0 + 1, q = rr * (M / 2) + pp;
          const float* ds = dd + (rr * nsb + sb) * 2;
          if constexpr (kQ4) {
            const __m256i b4 = _mm256_madd_epi16(mins16[rr], bsp);
            accm2[q] = _mm256_fmadd_ps(_mm256_mul_ps(ndyv, _mm256_set1_ps(ds[1])), _mm256_cvtepi32_ps(b4), accm2[q]);
          }
          const __m512i S = _mm512_add_epi32(_mm512_shuffle_i64x2(s[o0], s[o1], 0x44),
                                             _mm512_shuffle_i64x2(s[o0], s[o1], 0xEE));
          acc2[q] = _mm512_fmadd_ps(_mm512_mul_ps(dyv, _mm512_set1_ps(ds[0])), _mm512_cvtepi32_ps(S), acc2[q]);
        }
      }
      continue;
    }
    if constexpr (kQ4) {
      __m128i mins8[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        const __m256i v = _mm256_and_si256(_mm256_load_si256((const __m256i*)D[rr]->bc), _mm256_set1_epi32(0xFFFF));
        mins8[rr] = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
      }
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        float dy;
        std::memcpy(&dy, A[mm], 4);
        const __m128i bsp = _mm_hadd_epi16(_mm_loadu_si128((const __m128i*)(A[mm] + 260)),
                                           _mm_loadu_si128((const __m128i*)(A[mm] + 276)));
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          const int o = rr * M + mm;
          const float* ds = dd + (rr * nsb + sb) * 2;
          const __m128i b4 = _mm_madd_epi16(mins8[rr], bsp);
          accm[o] = _mm_fmadd_ps(_mm_set1_ps(-dy * ds[1]), _mm_cvtepi32_ps(b4), accm[o]);
          acc[o] = _mm256_fmadd_ps(_mm256_set1_ps(dy * ds[0]), _mm256_cvtepi32_ps(fold256(s[o])), acc[o]);
        }
      }
      continue;
    }
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      float dy;
      std::memcpy(&dy, A[mm], 4);
      const __m256i bs = _mm256_loadu_si256((const __m256i*)(A[mm] + 260));
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        const int o = rr * M + mm;
        const float* ds = dd + (rr * nsb + sb) * 2;
        const __m256i B = kOffset ? _mm256_setzero_si256()
                                  : _mm256_madd_epi16(_mm256_load_si256((const __m256i*)D[rr]->bc), bs);
        kq_update(min, dy * ds[0], -dy * ds[1], fold256(s[o]), B, acc[o], accm[o], summs[o]);
      }
    }
  }
  if constexpr (kPair) {
    CHIMERA_UNROLL for (int pp = 0; pp < M / 2; ++pp) {
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        const int q = rr * (M / 2) + pp;
        alignas(64) float a16[16];
        alignas(32) float m8[8];
        _mm512_store_ps(a16, acc2[q]);
        _mm256_store_ps(m8, accm2[q]);
        const KqMin mn = kQ4 ? KqMin::kLanes4 : KqMin::kNone;
        g.y[(i + 2 * pp) * g.ldy + r + rr] = detail::kq_finish(a16, m8, 0.f, mn);
        g.y[(i + 2 * pp + 1) * g.ldy + r + rr] = detail::kq_finish(a16 + 8, m8 + 4, 0.f, mn);
      }
    }
    return;
  }
  CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      const int o = rr * M + mm;
      alignas(32) float a8[8];
      alignas(16) float m4[4];
      _mm256_store_ps(a8, acc[o]);
      _mm_store_ps(m4, accm[o]);
      g.y[(i + mm) * g.ldy + r + rr] = detail::kq_finish(a8, m4, summs[o], min);
    }
  }
}

// ---------------------------------------------------------------- fused GEMV
// m == 1 (decode): no decoded panel. R weight rows are unpacked straight from
// storage in registers, 128 elements (two 512-bit halves "lo"/"hi") at a time,
// and share each activation load. Each 256-bit half of a 512-bit vector holds
// 32 consecutive elements starting at a multiple of 32, so after the final
// fold256 lane l again holds exactly S_l (matmul_kquant.h) — the integer sums
// are the panel kernel's, and the f32 updates are the same operations in the
// same order, so results are bit-identical to the tiled path (and to kScalar
// / kAvx2).
//   Q4_K/Q5_K: qs[64h..64h+63] & 0xF = elements [128h+0..31 | 128h+64..95] (lo),
//              >> 4 = [128h+32..63 | 128h+96..127] (hi); scales per 32.
//   Q6_K:      ql[64h..64h+63] & 0xF = [128h+0..63] (lo), >> 4 = [128h+64..127]
//              (hi), high bits from qh[32h..32h+31] in both halves.
CHIMERA_T_KQ512_INLINE float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Q4_K / Q5_K packed scales -> 16 bytes [sc0..7 | m0..7] (ggml's utmp
// shuffle, in SIMD; reads 4 bytes past the 12 scale bytes: still inside the
// block, qh / qs follow).
CHIMERA_T_KQ512_INLINE __m128i k4_scales_mins_v(const uint8_t* s12) {
  const __m128i v = _mm_loadu_si128((const __m128i*)s12);
  const __m128i a = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0));  // [u0, u2, u1, u2]
  const __m128i b = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  // [u0, u0, u1, u1]
  const __m128i lo = _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)),
                                   _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i hi = _mm_and_si128(_mm_srli_epi32(b, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(lo, hi);
}

// vpshufb control: in every 128-bit lane, all 8 words = word w of that lane.
constexpr int shuf_word(int w) { return 0x02020202 * w + 0x01000100; }
CHIMERA_T_KQ512_INLINE __m512i word_bcast_ctl(int w0, int w1, int w2, int w3) {
  const __m128i l0 = _mm_set1_epi32(shuf_word(w0)), l1 = _mm_set1_epi32(shuf_word(w1));
  const __m128i l2 = _mm_set1_epi32(shuf_word(w2)), l3 = _mm_set1_epi32(shuf_word(w3));
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(l1, l0)), _mm256_set_m128i(l3, l2), 1);
}

CHIMERA_T_KQ512_INLINE __m512i cat256(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

using detail::KqLayout;

// Per-qword rotate counts that move bit b_lower (qwords 0..3) / b_upper
// (qwords 4..7) of every byte to bit `target` of the same byte.
CHIMERA_T_KQ512_INLINE __m512i rot_to(int target, int b_lower, int b_upper) {
  const int64_t l = (target - b_lower) & 63, u = (target - b_upper) & 63;
  return _mm512_set_epi64(u, u, u, u, l, l, l, l);
}

// ORs one high bit per byte of H into the levels: wlo gets it rotated by
// rlo, whi by rhi, each masked to `bit`.
CHIMERA_T_KQ512_INLINE void or_high_bits(__m512i& wlo, __m512i& whi, __m512i H, __m512i rlo, __m512i rhi,
                                         __m512i bit) {
  wlo = _mm512_or_si512(wlo, _mm512_and_si512(_mm512_rolv_epi64(H, rlo), bit));
  whi = _mm512_or_si512(whi, _mm512_and_si512(_mm512_rolv_epi64(H, rhi), bit));
}

// Q3_K's 16 scales (q::q3_K_scale) as int16.
CHIMERA_T_KQ512_INLINE __m256i q3_scales_v(const uint8_t* s12) {
  alignas(16) uint8_t s6[16];
  q::q3_K_scales_biased(s12, s6);
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_load_si128((const __m128i*)s6)), _mm256_set1_epi16(32));
}

// Decode GEMV with the weights unpacked in registers (no decoded panel), in
// llama.cpp's order like the tiles. Q3_K and Q2_K share Q6_K's path (a scale
// per 16 elements, the same element placement): Q3_K's levels come from the
// 2-bit qs and the hmask bit, minus an offset (4 instead of 32); Q2_K's from
// the qs alone, no offset, with a min per 16 elements (KqMin::kLanes8).
// kLayout: storage or the kKqGroup layout (R == kKqGroup, r a multiple of it:
// row rr's block sb at group + (4 sb + rr) blocks).
template <GgmlType T, int R, bool kVnni, KqLayout kLayout = KqLayout::kStorage>
CHIMERA_T_KQ512 void gemv_fused(const GemmArgs& g, int64_t r) {
  constexpr bool kQ3 = T == GgmlType::Q3_K;
  constexpr bool kQ2 = T == GgmlType::Q2_K;
  constexpr bool kQ6 = T == GgmlType::Q6_K || kQ3 || kQ2;  // scale per 16 elements
  constexpr bool kQ5 = T == GgmlType::Q5_K;
  constexpr size_t kBb = kQ2   ? sizeof(q::block_q2_K)
                         : kQ3 ? sizeof(q::block_q3_K)
                         : kQ6 ? sizeof(q::block_q6_K)
                         : kQ5 ? sizeof(q::block_q5_K)
                               : sizeof(q::block_q4_K);
  static_assert(kLayout != KqLayout::kGroup4 || R == kKqGroup);
  constexpr size_t kAb = sizeof(q::block_q8_K);
  const int64_t nsb = g.k / q::kQK_K;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  const __m512i b10 = _mm512_set1_epi8(0x10);
  const __m512i off32 = _mm512_set1_epi8(kQ3 ? 4 : 32);
  const __m512i m3 = _mm512_set1_epi8(3), b4 = _mm512_set1_epi8(4);
  // Q6_K high bits: lo half 0 << 4, half 1 << 2; hi half 0 >> 0, half 1 >> 2.
  const __m512i q6_sl = _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4);
  const __m512i q6_sr = _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0);
  const uint8_t* W[R];
  CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
    W[rr] = kLayout == KqLayout::kGroup4 ? g.w + (size_t)r * g.w_stride + rr * kBb : g.w + (size_t)(r + rr) * g.w_stride;
  }
  // bytes from one super-block of a row to its next
  constexpr size_t kSbStep = kLayout == KqLayout::kGroup4 ? kKqGroup * kBb : kBb;
  __m256 acc[R];
  __m128 accm[R];
  float summs[R];
  CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
    acc[rr] = _mm256_setzero_ps();
    accm[rr] = _mm_setzero_ps();
    summs[rr] = 0.f;
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* A = g.a + (size_t)sb * kAb;
    float dy;
    std::memcpy(&dy, A, 4);
    __m512i s[R], s2[R];
    __m512i s16[R];
    [[maybe_unused]] __m256i min16[R];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      s[rr] = _mm512_setzero_si512();
      s2[rr] = _mm512_setzero_si512();
      const uint8_t* blk = W[rr] + (size_t)sb * kSbStep;
      {
        // Prefetch the next row group's super-block (R rows further) into L2:
        // far enough ahead to cover DRAM latency, same order as the compute
        // (T1 measured ~1.5x faster than T0 or none for cold weights).
        const char* pf = (const char*)(blk + (size_t)R * g.w_stride);
        CHIMERA_UNROLL for (size_t o = 0; o < kBb; o += 64) _mm_prefetch(pf + o, _MM_HINT_T1);
      }
      if constexpr (kQ2) {
        const __m128i sm = _mm_loadu_si128((const __m128i*)(blk + offsetof(q::block_q2_K, scales)));
        const __m128i lo4 = _mm_set1_epi8(0x0F);
        s16[rr] = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sm, lo4)));
        min16[rr] = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), lo4));
      } else if constexpr (kQ3) {
        s16[rr] = _mm512_castsi256_si512(q3_scales_v(blk + offsetof(q::block_q3_K, scales)));
      } else if constexpr (kQ6) {
        s16[rr] = _mm512_castsi256_si512(
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + offsetof(q::block_q6_K, scales)))));
      } else {
        s16[rr] = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(k4_scales_mins_v(blk + 4)));
      }
    }
    [[maybe_unused]] __m512i qh5;
    CHIMERA_UNROLL for (int h = 0; h < 2; ++h) {
      __m512i alo, ahi;
      if constexpr (kQ6) {
        alo = _mm512_loadu_si512(A + 4 + 128 * h);
        ahi = _mm512_loadu_si512(A + 4 + 128 * h + 64);
      } else {
        alo = cat256(_mm256_loadu_si256((const __m256i*)(A + 4 + 128 * h)),
                     _mm256_loadu_si256((const __m256i*)(A + 4 + 128 * h + 64)));
        ahi = cat256(_mm256_loadu_si256((const __m256i*)(A + 4 + 128 * h + 32)),
                     _mm256_loadu_si256((const __m256i*)(A + 4 + 128 * h + 96)));
      }
      [[maybe_unused]] __m512i olo, ohi;
      if constexpr (kQ6 && !kQ2) {
        olo = _mm512_maddubs_epi16(off32, alo);
        ohi = _mm512_maddubs_epi16(off32, ahi);
      }
      // Scale vectors by in-lane vpshufb from the scales broadcast to every
      // 128-bit lane (Q4_K/Q5_K: words 0..7 = sub-block scales; Q6_K: words
      // 8h..8h+7 of the 16 group scales).
      const __m512i ilo = kQ6 ? word_bcast_ctl(0, 1, 2, 3) : word_bcast_ctl(4 * h, 4 * h, 4 * h + 2, 4 * h + 2);
      const __m512i ihi = kQ6 ? word_bcast_ctl(4, 5, 6, 7) : word_bcast_ctl(4 * h + 1, 4 * h + 1, 4 * h + 3, 4 * h + 3);
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        const uint8_t* blk = W[rr] + (size_t)sb * kSbStep;
        const __m512i bsc = _mm512_broadcast_i32x4(kQ6 && h == 1 ? _mm512_extracti32x4_epi32(s16[rr], 1)
                                                                 : _mm512_castsi512_si128(s16[rr]));
        __m512i wlo, whi;
        if constexpr (kQ2 || kQ3) {
          // Element 128h + 32j + l: bits 2j, 2j+1 of qs[32h + l] (wlo = j 0, 1;
          // whi = j 2, 3, one per 256-bit half); Q3_K adds bit 4h + j of
          // hmask[l] as bit 2.
          constexpr size_t kQs = kQ2 ? offsetof(q::block_q2_K, qs) : offsetof(q::block_q3_K, qs);
          const __m512i QS = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(blk + kQs + 32 * h)));
          wlo = _mm512_and_si512(_mm512_srlv_epi64(QS, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0)), m3);
          whi = _mm512_and_si512(_mm512_srlv_epi64(QS, _mm512_set_epi64(6, 6, 6, 6, 4, 4, 4, 4)), m3);
          if constexpr (kQ3) {
            const __m512i HM = _mm512_broadcast_i64x4(
                _mm256_loadu_si256((const __m256i*)(blk + offsetof(q::block_q3_K, hmask))));
            or_high_bits(wlo, whi, HM, rot_to(2, 4 * h, 4 * h + 1), rot_to(2, 4 * h + 2, 4 * h + 3), b4);
          }
        } else if constexpr (kQ6) {
          const __m512i L = _mm512_loadu_si512(blk + 64 * h);
          const __m512i QH = _mm512_broadcast_i64x4(
              _mm256_loadu_si256((const __m256i*)(blk + offsetof(q::block_q6_K, qh) + 32 * h)));
          wlo = _mm512_or_si512(_mm512_and_si512(L, m4), _mm512_and_si512(_mm512_sllv_epi64(QH, q6_sl), m30));
          whi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4),
                                _mm512_and_si512(_mm512_srlv_epi64(QH, q6_sr), m30));
        } else {
          const __m512i L = _mm512_loadu_si512(blk + (kQ5 ? 48 : 16) + 64 * h);
          wlo = _mm512_and_si512(L, m4);
          whi = _mm512_and_si512(_mm512_srli_epi16(L, 4), m4);
          if constexpr (kQ5) {
            // qh bits 4h, 4h+2 (low nibbles) and 4h+1, 4h+3 (high) -> bit 4
            const __m512i QH = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(blk + 16)));
            or_high_bits(wlo, whi, QH, rot_to(4, 4 * h, 4 * h + 2), rot_to(4, 4 * h + 1, 4 * h + 3), b10);
          }
        }
        __m512i plo = _mm512_maddubs_epi16(wlo, alo);
        __m512i phi = _mm512_maddubs_epi16(whi, ahi);
        if constexpr (kQ6 && !kQ2) {
          plo = _mm512_sub_epi16(plo, olo);
          phi = _mm512_sub_epi16(phi, ohi);
        }
        // two independent chains per row (exact int32; joined below)
        s[rr] = Acc<kVnni>::step(s[rr], plo, _mm512_shuffle_epi8(bsc, ilo));
        s2[rr] = Acc<kVnni>::step(s2[rr], phi, _mm512_shuffle_epi8(bsc, ihi));
      }
    }
    [[maybe_unused]] __m128i bsp;
    [[maybe_unused]] __m256i bs16;
    if constexpr (kQ2) bs16 = _mm256_loadu_si256((const __m256i*)(A + 260));  // Q8_K bsums
    if constexpr (!kQ6) {
      // per-sub-block activation sums (bsums pairs), shared by the rows
      const __m128i b0 = _mm_loadu_si128((const __m128i*)(A + 260));
      const __m128i b1 = _mm_loadu_si128((const __m128i*)(A + 276));
      bsp = _mm_hadd_epi16(b0, b1);
    }
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      const uint8_t* blk = W[rr] + (size_t)sb * kSbStep;
      const __m256i S = fold256(_mm512_add_epi32(s[rr], s2[rr]));
      if constexpr (kQ2) {
        // mins first (lane l: B_l = m_2l bsum_2l + m_2l+1 bsum_2l+1), then the sums
        const float d = dy * f16_at(blk + offsetof(q::block_q2_K, d));
        const float dm = -dy * f16_at(blk + offsetof(q::block_q2_K, dmin));
        const __m256i B = _mm256_madd_epi16(min16[rr], bs16);
        acc[rr] = _mm256_fmadd_ps(_mm256_set1_ps(dm), _mm256_cvtepi32_ps(B), acc[rr]);
        acc[rr] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(S), acc[rr]);
      } else if constexpr (kQ6) {
        const float d = dy * f16_at(blk + (kQ3 ? offsetof(q::block_q3_K, d) : offsetof(q::block_q6_K, d)));
        acc[rr] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(S), acc[rr]);
      } else {
        const float d = dy * f16_at(blk);
        const float dm = -dy * f16_at(blk + 2);
        // 4 lanes: m_2k * bsp_2k + m_2k+1 * bsp_2k+1 = B_2k + B_2k+1
        const __m128i b4 = _mm_madd_epi16(_mm512_extracti32x4_epi32(s16[rr], 1), bsp);
        if constexpr (kQ5) {
          __m128i t = _mm_add_epi32(b4, _mm_unpackhi_epi64(b4, b4));
          t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
          summs[rr] = std::fma(dm, (float)_mm_cvtsi128_si32(t), summs[rr]);
        } else {
          accm[rr] = _mm_fmadd_ps(_mm_set1_ps(dm), _mm_cvtepi32_ps(b4), accm[rr]);
        }
        acc[rr] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(S), acc[rr]);
      }
    }
  }
  constexpr KqMin kMin = kQ2 ? KqMin::kLanes8 : kQ6 ? KqMin::kNone : kQ5 ? KqMin::kSum : KqMin::kLanes4;
  CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
    alignas(32) float a8[8];
    alignas(16) float m4v[4];
    _mm256_store_ps(a8, acc[rr]);
    _mm_store_ps(m4v, accm[rr]);
    g.y[r + rr] = detail::kq_finish(a8, m4v, summs[rr], kMin);
  }
}

template <GgmlType T, bool kVnni, KqLayout L = KqLayout::kStorage>
void gemv_fused_range(const GemmArgs& g, int64_t r0, int64_t r1) {
  if constexpr (L == KqLayout::kGroup4) {  // r0, r1: multiples of kKqGroup
    for (int64_t r = r0; r < r1; r += kKqGroup) gemv_fused<T, kKqGroup, kVnni, L>(g, r);
    return;
  }
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) gemv_fused<T, 4, kVnni>(g, r);
  switch (r1 - r) {
    case 3: gemv_fused<T, 3, kVnni>(g, r); break;
    case 2: gemv_fused<T, 2, kVnni>(g, r); break;
    case 1: gemv_fused<T, 1, kVnni>(g, r); break;
    default: break;
  }
}

constexpr int kRows = 4, kActs = 4;

template <bool kOffset, bool kVnni, bool kQ4 = false>
constexpr detail::KqTiles<kRows, kActs> make_tiles() {
  detail::KqTiles<kRows, kActs> t{};
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.fn[I / kActs][I % kActs] = &tile<I / kActs + 1, I % kActs + 1, kOffset, kVnni, kQ4>), ...);
  }(std::make_integer_sequence<int, kRows * kActs>{});
  // accumulators R*M + R weights + R scales + 2 <= 32 zmm
  t.rows_for[0] = 0;
  for (int m = 1; m <= kActs; ++m) t.rows_for[m] = 4;
  return t;
}

template <bool kVnni>
struct TileTables {
  static constexpr detail::KqTiles<kRows, kActs> plain = make_tiles<false, kVnni>();
  static constexpr detail::KqTiles<kRows, kActs> offset = make_tiles<true, kVnni>();
  static constexpr detail::KqTiles<kRows, kActs> q4 = make_tiles<false, kVnni, true>();
};

// L: the weight layout; repacked layouts get r0, r1 at multiples of their group.
template <GgmlType T, bool kVnni, KqLayout L = KqLayout::kStorage>
void gemm_kq512(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  if constexpr (L == KqLayout::kX16) {
    static const GemmFn x16 = kq_x16_gemm_avx512(T, kVnni);  // set: with_repack chose x16
    x16(g, r0, r1, i0, i1);
    return;
  } else {
    // Decode GEMV: fused (no decoded panel) for Q2_K/Q3_K in both layouts and
    // for Q4_K/Q5_K/Q6_K in storage layout (they repack as x16).
    constexpr bool kFusedStorage = T == GgmlType::Q4_K || T == GgmlType::Q5_K || T == GgmlType::Q6_K;
    if constexpr (T == GgmlType::Q2_K || T == GgmlType::Q3_K || (kFusedStorage && L == KqLayout::kStorage)) {
      if (i1 - i0 == 1) {
        GemmArgs g1 = g;
        g1.a = g.a + (size_t)i0 * g.a_stride;
        g1.y = g.y + i0 * g.ldy;
        gemv_fused_range<T, kVnni, L>(g1, r0, r1);
        return;
      }
    }
    const KqTypeInfo* t = kq_type_info(T);
    const auto& tiles = T == GgmlType::Q4_K ? TileTables<kVnni>::q4
                       : t->offset          ? TileTables<kVnni>::offset
                                            : TileTables<kVnni>::plain;
    detail::kq_gemm<kRows, kActs, L>(tiles, *t, kq_decode_avx2(T), g, r0, r1, i0, i1);
  }
}

// Types with x16 kernels (matmul_kquant_x16.h) use the x16 layout, the others
// the kKqGroup one.
template <GgmlType T, bool kVnni>
MatmulKernel with_repack(MatmulKernel k) {
  if (kq_x16_layout(T) && kq_x16_gemm_avx512(T, kVnni)) {
    kq_x16_set_repack(T, gemm_kq512<T, kVnni, KqLayout::kX16>, k);
  } else {
    kq_set_repack(T, gemm_kq512<T, kVnni, KqLayout::kGroup4>, k);
  }
  return k;
}

template <bool kVnni>
MatmulKernel make_kernel(format::GgmlType type) {
#define CHIMERA_KQ_ENTRY(T, NAME)                                                                              \
  case GgmlType::T:                                                                                            \
    return with_repack<GgmlType::T, kVnni>({kq_pack_act_avx2, kq_act_bytes, gemm_kq512<GgmlType::T, kVnni>,    \
                                            kVnni ? "gemm_" NAME "_q8_K_avx512vnni" : "gemm_" NAME "_q8_K_avx512", \
                                            GgmlType::Q8_K});
  switch (type) {
    CHIMERA_KQ_ENTRY(Q2_K, "q2_K")
    CHIMERA_KQ_ENTRY(Q3_K, "q3_K")
    CHIMERA_KQ_ENTRY(Q4_K, "q4_K")
    CHIMERA_KQ_ENTRY(Q5_K, "q5_K")
    CHIMERA_KQ_ENTRY(Q6_K, "q6_K")
    default: return {};
  }
#undef CHIMERA_KQ_ENTRY
}

}  // namespace

MatmulKernel kquant_kernel_avx512(format::GgmlType type) { return make_kernel<false>(type); }
MatmulKernel kquant_kernel_avx512vnni(format::GgmlType type) { return make_kernel<true>(type); }
MatmulKernel kquant_kernel_amx(format::GgmlType type) {
  const GemmFn amx = kq_x16_gemm_amx(type);
  if (!amx) return {};
  MatmulKernel k = make_kernel<true>(type);
  k.layout_name = k.name;  // the VNNI kernel's x16 layout and repack cache entries
  k.gemm_packed = amx;
  k.name = "gemm_q4_K_q8_K_amx";
  return k;
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel kquant_kernel_avx512(format::GgmlType) { return {}; }
MatmulKernel kquant_kernel_avx512vnni(format::GgmlType) { return {}; }
MatmulKernel kquant_kernel_amx(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
