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
// one vpdpwssd on VNNI. Precision: the per-super-block sums are exact int32,
// then f32 exactly as the scalar kernel (fma(d*dy, sum, acc)), so results are
// bit-identical to Isa::kScalar and Isa::kAvx2. Tolerance: matmul_kquant.h.
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

// Exact sums of four int32x8 vectors -> [sum a, sum b, sum c, sum d].
CHIMERA_T_KQ512_INLINE __m128i hsum4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

template <int N>
CHIMERA_T_KQ512_INLINE void reduce_store(const __m256i* v, int32_t* out) {
  constexpr int kGroups = (N + 3) / 4;
  CHIMERA_UNROLL for (int gi = 0; gi < kGroups; ++gi) {
    const __m256i z = _mm256_setzero_si256();
    const __m256i a = v[4 * gi];
    const __m256i b = 4 * gi + 1 < N ? v[4 * gi + 1] : z;
    const __m256i c = 4 * gi + 2 < N ? v[4 * gi + 2] : z;
    const __m256i d = 4 * gi + 3 < N ? v[4 * gi + 3] : z;
    _mm_storeu_si128((__m128i*)(out + 4 * gi), hsum4(a, b, c, d));
  }
}

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

template <int R, int M, bool kSep, bool kVnni>
CHIMERA_T_KQ512 void tile(const KqDecoded* dec, const float* dd, int64_t nsb, const GemmArgs& g,
                                      int64_t r, int64_t i) {
  constexpr size_t kAb = sizeof(q::block_q8_K);
  const uint8_t* a0 = g.a + (size_t)i * g.a_stride;
  float acc[R][M], accm[R][M];
  CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[rr][mm] = accm[rr][mm] = 0.f;
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const KqDecoded* D[R];
    const uint8_t* A[M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) D[rr] = dec + rr * nsb + sb;
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) A[mm] = a0 + mm * g.a_stride + sb * kAb;
    __m512i s[R * M];
    CHIMERA_UNROLL for (int t = 0; t < R * M; ++t) s[t] = _mm512_setzero_si512();
    CHIMERA_UNROLL for (int c = 0; c < 4; ++c) {
      const __m512i idx = _mm512_load_si512(kScaleIdx[c]);
      __m512i w[R], sc[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        w[rr] = _mm512_load_si512(D[rr]->q + 64 * c);
        sc[rr] = _mm512_permutexvar_epi16(idx, _mm512_load_si512(D[rr]->sc));
      }
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m512i av = _mm512_loadu_si512(A[mm] + 4 + 64 * c);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          s[rr * M + mm] = Acc<kVnni>::step(s[rr * M + mm], _mm512_maddubs_epi16(w[rr], av), sc[rr]);
        }
      }
    }
    __m256i s8[R * M], b8[R * M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      const __m256i bc = _mm256_load_si256((const __m256i*)D[rr]->bc);
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m256i bm = _mm256_madd_epi16(bc, _mm256_loadu_si256((const __m256i*)(A[mm] + 260)));
        s8[rr * M + mm] = fold256(s[rr * M + mm]);
        if constexpr (kSep) b8[rr * M + mm] = bm;
        else s8[rr * M + mm] = _mm256_add_epi32(s8[rr * M + mm], bm);
      }
    }
    int32_t isum[(R * M + 3) / 4 * 4], bsum[(R * M + 3) / 4 * 4];
    reduce_store<R * M>(s8, isum);
    if constexpr (kSep) reduce_store<R * M>(b8, bsum);
    float dy[M];
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) std::memcpy(&dy[mm], A[mm], 4);
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      const float dx = dd[(rr * nsb + sb) * 2], dmx = dd[(rr * nsb + sb) * 2 + 1];
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        acc[rr][mm] = std::fma(dx * dy[mm], (float)isum[rr * M + mm], acc[rr][mm]);
        if constexpr (kSep) accm[rr][mm] = std::fma(dmx * dy[mm], (float)bsum[rr * M + mm], accm[rr][mm]);
      }
    }
  }
  CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) g.y[(i + mm) * g.ldy + r + rr] = acc[rr][mm] - accm[rr][mm];
  }
}

constexpr int kRows = 4, kActs = 4;

template <bool kSep, bool kVnni>
constexpr detail::KqTiles<kRows, kActs> make_tiles() {
  detail::KqTiles<kRows, kActs> t{};
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.fn[I / kActs][I % kActs] = &tile<I / kActs + 1, I % kActs + 1, kSep, kVnni>), ...);
  }(std::make_integer_sequence<int, kRows * kActs>{});
  // accumulators R*M + R weights + R scales + 2 <= 32 zmm
  t.rows_for[0] = 0;
  for (int m = 1; m <= kActs; ++m) t.rows_for[m] = 4;
  return t;
}

template <bool kVnni>
struct TileTables {
  static constexpr detail::KqTiles<kRows, kActs> sep = make_tiles<true, kVnni>();
  static constexpr detail::KqTiles<kRows, kActs> fold = make_tiles<false, kVnni>();
};

template <GgmlType T, bool kVnni>
void gemm_kq512(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const KqTypeInfo* t = kq_type_info(T);
  detail::kq_gemm(t->separate_min ? TileTables<kVnni>::sep : TileTables<kVnni>::fold, kq_decode_avx2(T),
                  t->block_bytes, g, r0, r1, i0, i1);
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
