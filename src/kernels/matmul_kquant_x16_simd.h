// Internal to the AVX-512 x16 K-quant kernels (matmul_kquant_x16_*_avx512.cpp)
// and the packed Q4_0 / Q8_0 zmm tiles (matmul_legacy_packed_zmm.h): target
// attributes and the small vector helpers they share. x86-64 only.
#pragma once

#if defined(__x86_64__)

// GCC 12's AVX-512 intrinsics self-initialise "undefined" vectors, which
// -Wuninitialized reports once inlined into the kernels that include this.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#define CHIMERA_T_X16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define CHIMERA_T_X16_INLINE \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) inline

namespace chimera::kernels::x16 {

// s += a . b (int16 pairs -> int32 lanes): vpdpwssd on VNNI, else vpmaddwd +
// vpaddd (same exact int32). The VNNI instructions are inline asm so that the
// plain AVX-512 instantiation of a shared body never uses them.
template <bool kVnni>
CHIMERA_T_X16_INLINE __m512i dpwssd(__m512i s, __m512i a, __m512i b) {
  if constexpr (kVnni) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(s) : "v"(a), "v"(b));
    return s;
  } else {
    return _mm512_add_epi32(s, _mm512_madd_epi16(a, b));
  }
}

// matmul_kquant.h's reduction of a tile's 8 f32 lane accumulators c[0..7]
// (one output row per 32-bit lane), in its fixed order.
CHIMERA_T_X16_INLINE __m512 lane_sum8(const __m512* c) {
  return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c[0], c[4]), _mm512_add_ps(c[2], c[6])),
                       _mm512_add_ps(_mm512_add_ps(c[1], c[5]), _mm512_add_ps(c[3], c[7])));
}

// s += u8 . s8 (4 byte products per int32 lane), VNNI only.
CHIMERA_T_X16_INLINE __m512i dpbusd(__m512i s, __m512i u8, __m512i s8) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(s) : "v"(u8), "v"(s8));
  return s;
}

// s += u8 . (the 4 bytes at p in every 32-bit lane), VNNI only: one vpdpbusd
// with an embedded {1to16} broadcast of the memory dword, where a register
// operand costs a separate vpbroadcastd per product.
CHIMERA_T_X16_INLINE __m512i dpbusd_bcast(__m512i s, __m512i u8, const void* p) {
  typedef int32_t __attribute__((may_alias)) i32a;
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(s) : "v"(u8), "m"(*(const i32a*)p));
  return s;
}

// vpshufb control: dword i of every 128-bit lane = 16-bit words (byte 4i + u0,
// byte 4i + u1) of that lane, zero-extended; u1 < 0 gives a zero high word.
// On a scale plane (byte 16q + 4i + u = value u of row 4q + i) that is, in
// 32-bit lane r, the word pair of row r's values u0 and u1.
CHIMERA_T_X16_INLINE __m512i pick_words(int u0, int u1) {
  const int hi = u1 < 0 ? 0x80 : u1;
  const int ctl = u0 | (0x80 << 8) | (hi << 16) | (0x80 << 24);
  const __m128i step = u1 < 0 ? _mm_setr_epi32(0, 4, 8, 12) : _mm_setr_epi32(0, 4 | 4 << 16, 8 | 8 << 16, 12 | 12 << 16);
  return _mm512_broadcast_i32x4(_mm_add_epi32(_mm_set1_epi32(ctl), step));
}

// The 4 bytes at p broadcast to every 32-bit lane.
CHIMERA_T_X16_INLINE __m512i bcast32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

}  // namespace chimera::kernels::x16

#endif
