// AVX-512 GEMV over the x16 K-quant layout (matmul_kquant_x16.h): 16 weight
// rows per vector, one broadcast activation dword per 64-byte weight load.
//
// Q4_K, per super-block of a 16-row group:
//   scales: the three 64-byte planes give O0..O3 with 8 ops; one vpshufb per
//     sub-block j turns plane j/4 into V_j (32-bit lane r = sc_j(r) in both
//     16-bit halves), one per sub-block pair k into M_k (m_2k(r), m_2k+1(r)).
//   sums: chunk 8c + l holds qs bytes 32c + 4l.. of every row, i.e. elements
//     64c + 4l.. (low nibbles, sub-block 2c) and 64c + 32 + 4l.. (high,
//     sub-block 2c + 1) — lane l of llama.cpp's AVX2 vec_dot for both.
//     vpmaddubsw(nibbles, broadcast activations) -> two int16 pair sums per
//     row, vpdpwssd / vpmaddwd+vpaddd with V_j -> sc_j * partial, added into
//     S_l (16 rows). S_l is exact int32: the same value as the storage kernels.
//   f32: acc_l = fma(dy * d, (float)S_l, acc_l), mins accm_k = fma(-dy * dmin,
//     (float)(M_k . bsums pair k), accm_k), final reduction of
//     matmul_kquant.h — all per row, lane for lane: bit-identical to the
//     storage-layout and scalar kernels.
// Ops per 16 rows and super-block: ~245 (vs ~46 per row in the storage-layout
// fused GEMV), so the GEMV is bound by memory, not by the core.
#include "kernels/matmul_kquant_x16.h"

#if defined(__x86_64__)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_tile.h"
#include "quant/kquant_blocks.h"

#define CHIMERA_T_X16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define CHIMERA_T_X16_INLINE \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) inline

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

// s += p . sc (int16 pairs -> int32); vpdpwssd by inline asm so the plain
// AVX-512 build of this body never uses VNNI.
template <bool kVnni>
CHIMERA_T_X16_INLINE __m512i dot16(__m512i s, __m512i p, __m512i sc) {
  if constexpr (kVnni) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(s) : "v"(p), "v"(sc));
    return s;
  } else {
    return _mm512_add_epi32(s, _mm512_madd_epi16(p, sc));
  }
}

// vpshufb control: in every 128-bit lane, dword i = bytes [4i + u0, zero,
// 4i + u1, zero] -> 16-bit words (plane value u0, plane value u1).
CHIMERA_T_X16_INLINE __m512i pick_words(int u0, int u1) {
  const int ctl = (u0) | (0x80 << 8) | (u1 << 16) | (0x80 << 24);
  return _mm512_add_epi32(_mm512_set1_epi32(ctl), _mm512_set_epi32(12 | 12 << 16, 8 | 8 << 16, 4 | 4 << 16, 0,
                                                                    12 | 12 << 16, 8 | 8 << 16, 4 | 4 << 16, 0,
                                                                    12 | 12 << 16, 8 | 8 << 16, 4 | 4 << 16, 0,
                                                                    12 | 12 << 16, 8 | 8 << 16, 4 | 4 << 16, 0));
}

constexpr size_t kQ4GroupBlock = kX16Rows * sizeof(q::block_q4_K);
// Prefetch distance in the group stream (L2, as the storage fused GEMV).
constexpr size_t kPfBytes = 24 * 1024;

template <bool kVnni>
CHIMERA_T_X16 void q4_group(const GemmArgs& g, int64_t r) {
  constexpr size_t kAb = sizeof(q::block_q8_K);
  const int64_t nsb = g.k / q::kQK_K;
  const uint8_t* G = g.w + (size_t)r * g.w_stride;
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m6 = _mm512_set1_epi8(0x3F);
  __m512 acc[8], accm[4];
  CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[l] = _mm512_setzero_ps();
  CHIMERA_UNROLL for (int k = 0; k < 4; ++k) accm[k] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* B = G + (size_t)sb * kQ4GroupBlock;
    const uint8_t* A = g.a + (size_t)sb * kAb;
    CHIMERA_UNROLL for (size_t o = 0; o < kQ4GroupBlock; o += 64) _mm_prefetch((const char*)B + kPfBytes + o, _MM_HINT_T1);
    float dy;
    std::memcpy(&dy, A, 4);
    const __m512 dv = _mm512_mul_ps(_mm512_set1_ps(dy), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)B)));
    const __m512 dmv = _mm512_mul_ps(_mm512_set1_ps(-dy), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(B + 32))));
    const __m512i X0 = _mm512_loadu_si512(B + 64), X1 = _mm512_loadu_si512(B + 128), X2 = _mm512_loadu_si512(B + 192);
    {
      // mins: values 8..15 = planes O2 (m0..m3), O3 (m4..m7)
      const __m512i O2 = _mm512_and_si512(X2, m6);
      const __m512i t0 = _mm512_and_si512(_mm512_srli_epi16(X0, 6), _mm512_set1_epi8(0x03));
      const __m512i t1 = _mm512_and_si512(_mm512_srli_epi16(X1, 4), _mm512_set1_epi8(0x0C));
      const __m512i t2 = _mm512_and_si512(_mm512_srli_epi16(X2, 2), _mm512_set1_epi8(0x30));
      const __m512i O3 = _mm512_or_si512(_mm512_or_si512(t0, t1), t2);
      // sub-block activation sums bsp_j (int16 j = 0..7): dword k = (bsp_2k, bsp_2k+1)
      const __m128i bsp = _mm_hadd_epi16(_mm_loadu_si128((const __m128i*)(A + 260)),
                                         _mm_loadu_si128((const __m128i*)(A + 276)));
      const __m512i bp = _mm512_broadcast_i32x4(bsp);
      CHIMERA_UNROLL for (int k = 0; k < 4; ++k) {
        const __m512i Mk = _mm512_shuffle_epi8(k < 2 ? O2 : O3, pick_words(2 * (k % 2), 2 * (k % 2) + 1));
        const __m512i bk = _mm512_shuffle_epi32(bp, (_MM_PERM_ENUM)(k * 0x55));
        const __m512i B4 = _mm512_madd_epi16(Mk, bk);
        accm[k] = _mm512_fmadd_ps(dmv, _mm512_cvtepi32_ps(B4), accm[k]);
      }
    }
    const __m512i O0 = _mm512_and_si512(X0, m6), O1 = _mm512_and_si512(X1, m6);
    __m512i S[8];
    CHIMERA_UNROLL for (int l = 0; l < 8; ++l) S[l] = _mm512_setzero_si512();
    const uint8_t* qs = B + 256;
    CHIMERA_UNROLL for (int c = 0; c < 4; ++c) {
      // V_j: sub-block j's scale in both halves of each row's dword
      const __m512i Vlo = _mm512_shuffle_epi8(c < 2 ? O0 : O1, pick_words((2 * c) % 4, (2 * c) % 4));
      const __m512i Vhi = _mm512_shuffle_epi8(c < 2 ? O0 : O1, pick_words((2 * c + 1) % 4, (2 * c + 1) % 4));
      const uint8_t* a = A + 4 + 64 * c;
      CHIMERA_UNROLL for (int l = 0; l < 8; ++l) {
        const __m512i W = _mm512_load_si512(qs + 64 * (8 * c + l));
        int32_t alo, ahi;
        std::memcpy(&alo, a + 4 * l, 4);
        std::memcpy(&ahi, a + 32 + 4 * l, 4);
        const __m512i plo = _mm512_maddubs_epi16(_mm512_and_si512(W, m4), _mm512_set1_epi32(alo));
        const __m512i phi = _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(W, 4), m4), _mm512_set1_epi32(ahi));
        S[l] = dot16<kVnni>(S[l], plo, Vlo);
        S[l] = dot16<kVnni>(S[l], phi, Vhi);
      }
    }
    CHIMERA_UNROLL for (int l = 0; l < 8; ++l) acc[l] = _mm512_fmadd_ps(dv, _mm512_cvtepi32_ps(S[l]), acc[l]);
  }
  // matmul_kquant.h's reduction, lane (= row) for lane
  const __m512 y8 = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[4]), _mm512_add_ps(acc[2], acc[6])),
                                  _mm512_add_ps(_mm512_add_ps(acc[1], acc[5]), _mm512_add_ps(acc[3], acc[7])));
  const __m512 ym = _mm512_add_ps(_mm512_add_ps(accm[0], accm[2]), _mm512_add_ps(accm[1], accm[3]));
  _mm512_storeu_ps(g.y + r, _mm512_add_ps(y8, ym));
}

template <bool kVnni>
void q4_gemv(const GemmArgs& g, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; r += kX16Rows) q4_group<kVnni>(g, r);
}

}  // namespace

KqX16GemvFn kq_x16_gemv_avx512(GgmlType type, bool vnni) {
  switch (type) {
    case GgmlType::Q4_K: return vnni ? q4_gemv<true> : q4_gemv<false>;
    default: return nullptr;
  }
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
KqX16GemvFn kq_x16_gemv_avx512(format::GgmlType, bool) { return nullptr; }
}  // namespace chimera::kernels

#endif
