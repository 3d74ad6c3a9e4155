// AVX-512 K-quant matmul kernels: Isa::kAvx512 (F/BW/DQ/VL) and
// Isa::kAvx512Vnni (vpdpwssd) for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K weights x Q8_K
// activations (ggml block_q8_K layout).
//
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

template <int R, int M, bool kOffset, bool kVnni>
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

constexpr int kRows = 4, kActs = 4;

template <bool kOffset, bool kVnni>
constexpr detail::KqTiles<kRows, kActs> make_tiles() {
  detail::KqTiles<kRows, kActs> t{};
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.fn[I / kActs][I % kActs] = &tile<I / kActs + 1, I % kActs + 1, kOffset, kVnni>), ...);
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
};

template <GgmlType T, bool kVnni>
void gemm_kq512(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const KqTypeInfo* t = kq_type_info(T);
  detail::kq_gemm(t->offset ? TileTables<kVnni>::offset : TileTables<kVnni>::plain, *t, kq_decode_avx2(T), g, r0, r1,
                  i0, i1);
}

template <bool kVnni>
MatmulKernel make_kernel(format::GgmlType type) {
#define CHIMERA_KQ_ENTRY(T, NAME)                                                                              \
  case GgmlType::T:                                                                                            \
    return {kq_pack_act, kq_act_bytes, gemm_kq512<GgmlType::T, kVnni>,                                         \
            kVnni ? "gemm_" NAME "_q8_K_avx512vnni" : "gemm_" NAME "_q8_K_avx512", GgmlType::Q8_K};
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

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel kquant_kernel_avx512(format::GgmlType) { return {}; }
MatmulKernel kquant_kernel_avx512vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
