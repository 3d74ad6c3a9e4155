// AVX2 K-quant matmul kernels (Isa::kAvx2): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
// weights x Q8_K activations (ggml block_q8_K layout, packed once per call).
//
// Layout: weight super-blocks are unpacked in registers into KqDecoded
// (matmul_kquant.h: 256 unsigned levels 0..63 in element order, int16 scale
// and bias coefficient per 16 elements) once per panel of up to 4 rows and
// reused by every activation tile (prefill decodes each weight once). Tiles
// of R rows x M activations (R*M <= 8 accumulators) walk 32-element chunks:
// vpmaddubsw(levels u8, activations s8) -> int16 pairs (|.| <= 2*63*127, no
// saturation), vpmaddwd with the chunk's [sc_g x8 | sc_g+1 x8] scales ->
// int32 lanes (Q3_K/Q6_K subtract vpmaddubsw(offset, a) first, as llama.cpp).
// Precision: the 8 lanes hold exact int32 sums per super-block, then f32
// exactly as llama.cpp's AVX2 vec_dot (vfmadd into 8 f32 lanes per output,
// fixed final reduction; matmul_kquant.h), so results are bit-identical to
// Isa::kScalar and to llama.cpp's AVX2 build. Tolerance: matmul_kquant.h.
#include "kernels/matmul_kquant.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/matmul_tile.h"

#define CHIMERA_T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define CHIMERA_T_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

CHIMERA_T_AVX2_INLINE float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
CHIMERA_T_AVX2_INLINE __m256i loadu(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
CHIMERA_T_AVX2_INLINE void store(void* p, __m256i v) { _mm256_store_si256(static_cast<__m256i*>(p), v); }

// ---------------------------------------------------------------- decoders
// Each writes exactly what the scalar decoder of matmul_kquant_scalar.cpp does.

// Q4_K / Q5_K packed 6-bit scales and mins -> duplicated int16 sc / bc.
CHIMERA_T_AVX2_INLINE void decode_k4_scales(const uint8_t* s12, KqDecoded* out) {
  uint32_t u[4];
  std::memcpy(u, s12, 12);
  constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
  u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
  const uint32_t mins_lo = u[1] & kmask1;
  u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
  u[2] = mins_lo;
  u[0] &= kmask1;
  // bytes 0..7 scales, 8..15 mins
  const __m256i x16 = _mm256_cvtepu8_epi16(_mm_setr_epi32((int)u[0], (int)u[1], (int)u[2], (int)u[3]));
  const __m256i lo = _mm256_unpacklo_epi16(x16, x16), hi = _mm256_unpackhi_epi16(x16, x16);
  store(out->sc, _mm256_permute2x128_si256(lo, hi, 0x20));
  store(out->bc, _mm256_permute2x128_si256(lo, hi, 0x31));
}

CHIMERA_T_AVX2 void decode_q4_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const uint8_t* qs = blk + offsetof(q::block_q4_K, qs);
  for (int j = 0; j < 4; ++j) {
    const __m256i v = loadu(qs + 32 * j);
    store(out->q + 64 * j, _mm256_and_si256(v, m4));
    store(out->q + 64 * j + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
  }
  decode_k4_scales(blk + offsetof(q::block_q4_K, scales), out);
  dd[0] = load_f16(blk + offsetof(q::block_q4_K, d));
  dd[1] = load_f16(blk + offsetof(q::block_q4_K, dmin));
}

CHIMERA_T_AVX2 void decode_q5_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
  const uint8_t* qs = blk + offsetof(q::block_q5_K, qs);
  __m256i h = loadu(blk + offsetof(q::block_q5_K, qh));
  for (int j = 0; j < 4; ++j) {
    // bits 0 / 1 of each byte of h (= qh bits 2j / 2j+1) -> bit 4
    const __m256i v = loadu(qs + 32 * j);
    const __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(h, 4), b4);
    const __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(h, 3), b4);
    store(out->q + 64 * j, _mm256_or_si256(_mm256_and_si256(v, m4), h0));
    store(out->q + 64 * j + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), h1));
    h = _mm256_srli_epi16(h, 2);
  }
  decode_k4_scales(blk + offsetof(q::block_q5_K, scales), out);
  dd[0] = load_f16(blk + offsetof(q::block_q5_K, d));
  dd[1] = load_f16(blk + offsetof(q::block_q5_K, dmin));
}

CHIMERA_T_AVX2 void decode_q6_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = loadu(blk + 64 * h), ql1 = loadu(blk + 64 * h + 32);
    const __m256i qh = loadu(blk + offsetof(q::block_q6_K, qh) + 32 * h);
    uint8_t* o = out->q + 128 * h;
    store(o, _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
    store(o + 32, _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
    store(o + 64, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)));
    store(o + 96,
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
  }
  const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(blk + offsetof(q::block_q6_K, scales))));
  store(out->sc, sc);
  store(out->bc, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc, 5)));
  dd[0] = load_f16(blk + offsetof(q::block_q6_K, d));
  dd[1] = 0.f;
}

CHIMERA_T_AVX2 void decode_q2_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  const __m256i m3 = _mm256_set1_epi8(3);
  for (int h = 0; h < 2; ++h) {
    __m256i v = loadu(blk + offsetof(q::block_q2_K, qs) + 32 * h);
    for (int j = 0; j < 4; ++j) {
      store(out->q + 128 * h + 32 * j, _mm256_and_si256(v, m3));
      v = _mm256_srli_epi16(v, 2);
    }
  }
  const __m128i s = _mm_loadu_si128((const __m128i*)(blk + offsetof(q::block_q2_K, scales)));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  store(out->sc, _mm256_cvtepu8_epi16(_mm_and_si128(s, m4)));
  store(out->bc, _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s, 4), m4)));
  dd[0] = load_f16(blk + offsetof(q::block_q2_K, d));
  dd[1] = load_f16(blk + offsetof(q::block_q2_K, dmin));
}

CHIMERA_T_AVX2 void decode_q3_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  const __m256i m3 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4);
  __m256i hm = loadu(blk + offsetof(q::block_q3_K, hmask));
  for (int h = 0; h < 2; ++h) {
    __m256i v = loadu(blk + offsetof(q::block_q3_K, qs) + 32 * h);
    for (int j = 0; j < 4; ++j) {
      // bit 0 of each byte of hm (= hmask bit 4h+j) -> bit 2
      const __m256i hb = _mm256_and_si256(_mm256_slli_epi16(hm, 2), b2);
      store(out->q + 128 * h + 32 * j, _mm256_or_si256(_mm256_and_si256(v, m3), hb));
      v = _mm256_srli_epi16(v, 2);
      hm = _mm256_srli_epi16(hm, 1);
    }
  }
  alignas(16) uint8_t s6[16];
  q::q3_K_scales_biased(blk + offsetof(q::block_q3_K, scales), s6);
  const __m256i scv =
      _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_load_si128((const __m128i*)s6)), _mm256_set1_epi16(32));
  store(out->sc, scv);
  store(out->bc, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(scv, 2)));
  dd[0] = load_f16(blk + offsetof(q::block_q3_K, d));
  dd[1] = 0.f;
}

// ---------------------------------------------------------------- tiles

// Exact horizontal sum of 8 int32 lanes.
CHIMERA_T_AVX2_INLINE int32_t hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
}

// One super-block's f32 update of one output (matmul_kquant.h): S = exact
// per-lane sums, B = per-lane mins products (unused for KqMin::kNone).
CHIMERA_T_AVX2_INLINE void kq_update(KqMin min, float d, float dm, __m256i S, __m256i B, __m256& acc, __m128& accm,
                                     float& summs) {
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

template <int R, int M, bool kOffset>
CHIMERA_T_AVX2 void tile(const KqDecoded* dec, const float* dd, int64_t nsb, const KqTypeInfo& t, const GemmArgs& g,
                         int64_t r, int64_t i) {
  constexpr size_t kAb = sizeof(q::block_q8_K);
  const __m256i shuf = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,  //
                                        2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
  const __m256i offv = _mm256_set1_epi8((char)t.offset);
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
    __m256i s[R * M];
    CHIMERA_UNROLL for (int o = 0; o < R * M; ++o) s[o] = _mm256_setzero_si256();
    CHIMERA_UNROLL for (int c = 0; c < 8; ++c) {
      __m256i w[R], sc[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        w[rr] = _mm256_load_si256((const __m256i*)(D[rr]->q + 32 * c));
        int32_t pair;
        std::memcpy(&pair, &D[rr]->sc[2 * c], 4);
        sc[rr] = _mm256_shuffle_epi8(_mm256_set1_epi32(pair), shuf);
      }
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m256i av = loadu(A[mm] + 4 + 32 * c);
        __m256i os = _mm256_setzero_si256();
        if constexpr (kOffset) os = _mm256_maddubs_epi16(offv, av);  // offset * pair sums of a
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          __m256i p = _mm256_maddubs_epi16(w[rr], av);
          if constexpr (kOffset) p = _mm256_sub_epi16(p, os);
          s[rr * M + mm] = _mm256_add_epi32(s[rr * M + mm], _mm256_madd_epi16(p, sc[rr]));
        }
      }
    }
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      float dy;
      std::memcpy(&dy, A[mm], 4);
      const __m256i bs = loadu(A[mm] + 260);
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        const int o = rr * M + mm;
        const float* ds = dd + (rr * nsb + sb) * 2;
        const __m256i B = kOffset ? _mm256_setzero_si256()
                                  : _mm256_madd_epi16(_mm256_load_si256((const __m256i*)D[rr]->bc), bs);
        kq_update(min, dy * ds[0], -dy * ds[1], s[o], B, acc[o], accm[o], summs[o]);
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

template <bool kOffset>
constexpr detail::KqTiles<kRows, kActs> make_tiles() {
  detail::KqTiles<kRows, kActs> t{};
  [&]<int... I>(std::integer_sequence<int, I...>) {
    ((t.fn[I / kActs][I % kActs] = &tile<I / kActs + 1, I % kActs + 1, kOffset>), ...);
  }(std::make_integer_sequence<int, kRows * kActs>{});
  // int accumulators R*M + R weights + R scales + 2 <= 16 ymm
  t.rows_for[0] = 0;
  t.rows_for[1] = 4;
  t.rows_for[2] = 3;
  t.rows_for[3] = 2;
  t.rows_for[4] = 2;
  return t;
}

constexpr detail::KqTiles<kRows, kActs> kTilesPlain = make_tiles<false>();
constexpr detail::KqTiles<kRows, kActs> kTilesOffset = make_tiles<true>();

// kPacked: the repacked layout (matmul_kquant.h); same panels, same bits.
template <GgmlType T, bool kPacked = false>
void gemm_avx2(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const KqTypeInfo* t = kq_type_info(T);
  detail::kq_gemm<kRows, kActs, kPacked ? detail::KqLayout::kGroup4 : detail::KqLayout::kStorage>(t->offset ? kTilesOffset : kTilesPlain, *t, kq_decode_avx2(T), g, r0, r1, i0,
                                         i1);
}

// Every K-quant with x16 kernels (matmul_kquant_x16.h: all five at present)
// uses the x16 layout, another type would use the kKqGroup one.
template <GgmlType T>
MatmulKernel with_repack(MatmulKernel k) {
  if (const GemmFn x16 = kq_x16_gemm_avx2(T)) {
    kq_x16_set_repack(T, x16, k);
  } else {
    kq_set_repack(T, gemm_avx2<T, true>, k);
  }
  return k;
}

}  // namespace

KqDecodeFn kq_decode_avx2(format::GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K: return decode_q2_K;
    case GgmlType::Q3_K: return decode_q3_K;
    case GgmlType::Q4_K: return decode_q4_K;
    case GgmlType::Q5_K: return decode_q5_K;
    case GgmlType::Q6_K: return decode_q6_K;
    default: return nullptr;
  }
}

MatmulKernel kquant_kernel_avx2(format::GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return with_repack<GgmlType::Q2_K>(
          {kq_pack_act_avx2, kq_act_bytes, gemm_avx2<GgmlType::Q2_K>, "gemm_q2_K_q8_K_avx2", GgmlType::Q8_K});
    case GgmlType::Q3_K:
      return with_repack<GgmlType::Q3_K>(
          {kq_pack_act_avx2, kq_act_bytes, gemm_avx2<GgmlType::Q3_K>, "gemm_q3_K_q8_K_avx2", GgmlType::Q8_K});
    case GgmlType::Q4_K:
      return with_repack<GgmlType::Q4_K>(
          {kq_pack_act_avx2, kq_act_bytes, gemm_avx2<GgmlType::Q4_K>, "gemm_q4_K_q8_K_avx2", GgmlType::Q8_K});
    case GgmlType::Q5_K:
      return with_repack<GgmlType::Q5_K>(
          {kq_pack_act_avx2, kq_act_bytes, gemm_avx2<GgmlType::Q5_K>, "gemm_q5_K_q8_K_avx2", GgmlType::Q8_K});
    case GgmlType::Q6_K:
      return with_repack<GgmlType::Q6_K>(
          {kq_pack_act_avx2, kq_act_bytes, gemm_avx2<GgmlType::Q6_K>, "gemm_q6_K_q8_K_avx2", GgmlType::Q8_K});
    default: return {};
  }
}

MatmulKernel kquant_kernel_avx2vnni(format::GgmlType type) {
  const GemmFn x16 = kq_x16_gemm_avx2vnni(type);
  if (!x16) return {};
  MatmulKernel k = kquant_kernel_avx2(type);
  kq_x16_set_repack(type, x16, k);
  k.name = type == GgmlType::Q6_K ? "gemm_q6_K_q8_K_avx2vnni" : "gemm_q4_K_q8_K_avx2vnni";
  return k;
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
KqDecodeFn kq_decode_avx2(format::GgmlType) { return nullptr; }
MatmulKernel kquant_kernel_avx2(format::GgmlType) { return {}; }
MatmulKernel kquant_kernel_avx2vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
