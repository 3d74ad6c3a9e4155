// AVX-512 GEMM (m > 1) straight from the x16 Q4_K layout
// (matmul_kquant_x16.h): tiles of 16 weight rows x M <= 8 activation rows,
// no decoded panel.
//
// Per super-block: the scale planes give V_0..V_7 (sub-block scales, both
// 16-bit halves of each row's dword) and M_0..M_3 (min pairs) once for the
// tile; then for each lane l = 0..7 of llama.cpp's AVX2 vec_dot, the four
// chunks 8c + l (qs bytes 32c + 4l.. of the 16 rows) are loaded once, split
// into nibbles once, and each activation row accumulates
//   S_m += V_2c . maddubs(lo, a_m[64c + 4l..]) + V_2c+1 . maddubs(hi, a_m[64c + 32 + 4l..])
// — the exact int32 S_l of row r in lane r — followed by the f32 update of
// matmul_kquant.h (acc_l = fma(dy * d, S_l, acc_l); mins through the
// activations' sub-block sums; final reduction), lane for lane. So the
// results are bit-identical to the GEMV, the storage-layout kernels and the
// scalar reference, for any m, bounds and thread count.
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "kernels/matmul_tile.h"
#include "quant/kquant_blocks.h"

#define CHIMERA_T_X16G __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define CHIMERA_T_X16G_INLINE \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) inline

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

constexpr size_t kAb = sizeof(q::block_q8_K);
constexpr size_t kQ4GroupBlock = kX16Rows * sizeof(q::block_q4_K);
constexpr int kMaxActs = 8;

template <bool kVnni>
CHIMERA_T_X16G_INLINE __m512i dot16(__m512i s, __m512i p, __m512i sc) {
  if constexpr (kVnni) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(s) : "v"(p), "v"(sc));
    return s;
  } else {
    return _mm512_add_epi32(s, _mm512_madd_epi16(p, sc));
  }
}

// vpshufb control: dword i of every 128-bit lane = words (plane byte 4i + u0,
// plane byte 4i + u1), zero-extended.
CHIMERA_T_X16G_INLINE __m512i pick_words(int u0, int u1) {
  const int ctl = u0 | (0x80 << 8) | (u1 << 16) | (0x80 << 24);
  const __m128i step = _mm_setr_epi32(0, 4 | 4 << 16, 8 | 8 << 16, 12 | 12 << 16);
  return _mm512_broadcast_i32x4(_mm_add_epi32(_mm_set1_epi32(ctl), step));
}

CHIMERA_T_X16G_INLINE __m512i bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// 16 rows (group at G) x M activation rows (A, a_stride apart) -> y.
template <bool kVnni, int M>
CHIMERA_T_X16G void q4_tile(const uint8_t* G, const uint8_t* A, size_t a_stride, int64_t nsb, float* y,
                            int64_t ldy) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m6 = _mm512_set1_epi8(0x3F);
  __m512 acc[M][8], accm[M][4];
  CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
    CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[m][l] = _mm512_setzero_ps();
    CHIMERA_UNROLL for (int k = 0; k < 4; ++k) accm[m][k] = _mm512_setzero_ps();
  }
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* B = G + (size_t)sb * kQ4GroupBlock;
    const uint8_t* Am[M];
    float dy[M];
    CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
      Am[m] = A + (size_t)m * a_stride + (size_t)sb * kAb;
      std::memcpy(&dy[m], Am[m], 4);
    }
    const __m512 d16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)B));
    const __m512 dmin16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i*)(B + 32)));
    const __m512i X0 = _mm512_load_si512(B + 64), X1 = _mm512_load_si512(B + 128), X2 = _mm512_load_si512(B + 192);
    {
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
        const __m512 dmv = _mm512_mul_ps(_mm512_set1_ps(-dy[m]), dmin16);
        const __m512i bp = _mm512_broadcast_i32x4(_mm_hadd_epi16(_mm_loadu_si128((const __m128i*)(Am[m] + 260)),
                                                                 _mm_loadu_si128((const __m128i*)(Am[m] + 276))));
        CHIMERA_UNROLL for (int k = 0; k < 4; ++k) {
          const __m512i B4 = _mm512_madd_epi16(Mk[k], _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)(k * 0x55)));
          accm[m][k] = _mm512_fmadd_ps(dmv, _mm512_cvtepi32_ps(B4), accm[m][k]);
        }
      }
    }
    const __m512i O0 = _mm512_and_si512(X0, m6), O1 = _mm512_and_si512(X1, m6);
    __m512i V[8];
    CHIMERA_UNROLL for (int j = 0; j < 8; ++j) V[j] = _mm512_shuffle_epi8(j < 4 ? O0 : O1, pick_words(j % 4, j % 4));
    const uint8_t* qs = B + 256;
    CHIMERA_UNROLL for (int l = 0; l < 8; ++l) {
      __m512i S[M];
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) S[m] = _mm512_setzero_si512();
      CHIMERA_UNROLL for (int c = 0; c < 4; ++c) {
        const __m512i W = _mm512_load_si512(qs + 64 * (8 * c + l));
        const __m512i lo = _mm512_and_si512(W, m4), hi = _mm512_and_si512(_mm512_srli_epi16(W, 4), m4);
        CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
          const uint8_t* a = Am[m] + 4 + 64 * c + 4 * l;
          S[m] = dot16<kVnni>(S[m], _mm512_maddubs_epi16(lo, bcast32(a)), V[2 * c]);
          S[m] = dot16<kVnni>(S[m], _mm512_maddubs_epi16(hi, bcast32(a + 32)), V[2 * c + 1]);
        }
      }
      CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
        const __m512 dv = _mm512_mul_ps(_mm512_set1_ps(dy[m]), d16);
        acc[m][l] = _mm512_fmadd_ps(dv, _mm512_cvtepi32_ps(S[m]), acc[m][l]);
      }
    }
  }
  CHIMERA_UNROLL for (int m = 0; m < M; ++m) {
    const __m512 y8 =
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[m][0], acc[m][4]), _mm512_add_ps(acc[m][2], acc[m][6])),
                      _mm512_add_ps(_mm512_add_ps(acc[m][1], acc[m][5]), _mm512_add_ps(acc[m][3], acc[m][7])));
    const __m512 ym = _mm512_add_ps(_mm512_add_ps(accm[m][0], accm[m][2]), _mm512_add_ps(accm[m][1], accm[m][3]));
    _mm512_storeu_ps(y + m * ldy, _mm512_add_ps(y8, ym));
  }
}

using TileFn = void (*)(const uint8_t*, const uint8_t*, size_t, int64_t, float*, int64_t);

template <bool kVnni>
constexpr auto make_tiles() {
  return []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<TileFn, kMaxActs>{&q4_tile<kVnni, I + 1>...};
  }(std::make_integer_sequence<int, kMaxActs>{});
}

template <bool kVnni>
void q4_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  static constexpr auto kTiles = make_tiles<kVnni>();
  const int64_t nsb = g.k / q::kQK_K;
  // Activation rows per block: keep them L2-resident while the row groups
  // (each reused by the whole block from L1/L2) stream past.
  const int64_t ib_rows =
      std::max<int64_t>(1, (int64_t)(256 * 1024 / std::max<size_t>(g.a_stride, 1)) / kMaxActs) * kMaxActs;
  for (int64_t ib = i0; ib < i1; ib += ib_rows) {
    const int64_t ie = std::min(i1, ib + ib_rows);
    for (int64_t r = r0; r < r1; r += kX16Rows) {
      const uint8_t* G = g.w + (size_t)r * g.w_stride;
      for (int64_t i = ib; i < ie; i += kMaxActs) {
        const int mm = (int)std::min<int64_t>(kMaxActs, ie - i);
        kTiles[mm - 1](G, g.a + (size_t)i * g.a_stride, g.a_stride, nsb, g.y + i * g.ldy + r, g.ldy);
      }
    }
  }
}

}  // namespace

GemmFn kq_x16_gemm_avx512(GgmlType type, bool vnni) {
  switch (type) {
    case GgmlType::Q4_K: return vnni ? q4_gemm<true> : q4_gemm<false>;
    default: return nullptr;
  }
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
GemmFn kq_x16_gemm_avx512(format::GgmlType, bool) { return nullptr; }
}  // namespace chimera::kernels

#endif
