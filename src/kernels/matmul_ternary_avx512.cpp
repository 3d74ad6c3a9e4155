// AVX-512 ternary matmul kernels (Isa::kAvx512, Isa::kAvx512Vnni): TQ1_0 /
// TQ2_0 weights x Q8_K activations. Layout: rows decoded to trits once per
// call (matmul_ternary.h), then per super-block 4 chunks of 64 elements:
// vpmaddubsw + vpmaddwd(1) (plain AVX-512BW) or vpdpbusd (VNNI) into 16 int32
// lanes; lane L holds elements with (e mod 64) / 4 == L, so folding the upper
// 8 lanes onto the lower 8 gives exactly llama.cpp's 8 AVX2 lanes
// ((e mod 32) / 4 == l). Minus the pairwise bsums, then vfmadd into 8 f32 lanes
// and the fixed reduction of matmul_ternary.h. Precision: exact int32 lanes,
// bit-identical to Isa::kScalar and Isa::kAvx2.
#include "kernels/matmul_ternary.h"

#if defined(__x86_64__)

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_kquant.h"

#define CHIMERA_T_TQ512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define CHIMERA_T_TQ512VNNI \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

CHIMERA_T_TQ512 float tq2_0_decode_512(const uint8_t* blk, TqDecoded* out) {
  const __m512i mask = _mm512_set1_epi8(3);
  // 64 bytes qs: byte 32h+m holds elements 128h + 32n + m.
  const __m512i x = _mm512_loadu_si512((const void*)blk);
  for (int n = 0; n < 4; ++n) {
    const __m512i t = _mm512_and_si512(_mm512_srli_epi16(x, 2 * n), mask);
    _mm256_store_si256((__m256i*)(out->t + 32 * n), _mm512_castsi512_si256(t));
    _mm256_store_si256((__m256i*)(out->t + 128 + 32 * n), _mm512_extracti64x4_epi64(t, 1));
  }
  uint16_t d;
  std::memcpy(&d, blk + 64, 2);
  return _cvtsh_ss(d);
}

template <bool kVnni>
inline __m512i lanes_512(const TqDecoded& w, const int8_t* qs);

template <>
CHIMERA_T_TQ512 inline __m512i lanes_512<false>(const TqDecoded& w, const int8_t* qs) {
  const __m512i ones = _mm512_set1_epi16(1);
  __m512i s = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    const __m512i t = _mm512_load_si512((const void*)(w.t + 64 * c));
    const __m512i a = _mm512_loadu_si512((const void*)(qs + 64 * c));
    s = _mm512_add_epi32(s, _mm512_madd_epi16(_mm512_maddubs_epi16(t, a), ones));
  }
  return s;
}

template <>
CHIMERA_T_TQ512VNNI inline __m512i lanes_512<true>(const TqDecoded& w, const int8_t* qs) {
  __m512i s = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    const __m512i t = _mm512_load_si512((const void*)(w.t + 64 * c));
    const __m512i a = _mm512_loadu_si512((const void*)(qs + 64 * c));
    s = _mm512_dpbusd_epi32(s, t, a);
  }
  return s;
}

template <bool kVnni>
CHIMERA_T_TQ512VNNI float dot_512(const TqDecoded* w, const float* wd, const uint8_t* act, int64_t nsb) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* y = act + (size_t)sb * sizeof(q::block_q8_K);
    const __m512i s16 = lanes_512<kVnni>(w[sb], (const int8_t*)(y + 4));
    __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(s16), _mm512_extracti64x4_epi64(s16, 1));
    const __m256i bs = _mm256_loadu_si256((const __m256i*)(y + 260));
    s = _mm256_sub_epi32(s, _mm256_madd_epi16(bs, ones));
    float dy;
    std::memcpy(&dy, y, 4);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * wd[sb]), _mm256_cvtepi32_ps(s), acc);
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  return detail::tq_finish(l);
}

template <bool kVnni>
MatmulKernel make_kernel(format::GgmlType type) {
  switch (type) {
    case GgmlType::TQ1_0:
      return {kq_pack_act, kq_act_bytes, detail::tq_gemm<tq1_0_decode, sizeof(q::block_tq1_0), dot_512<kVnni>>,
              kVnni ? "gemm_tq1_0_q8_K_avx512vnni" : "gemm_tq1_0_q8_K_avx512", GgmlType::Q8_K};
    case GgmlType::TQ2_0:
      return {kq_pack_act, kq_act_bytes, detail::tq_gemm<tq2_0_decode_512, sizeof(q::block_tq2_0), dot_512<kVnni>>,
              kVnni ? "gemm_tq2_0_q8_K_avx512vnni" : "gemm_tq2_0_q8_K_avx512", GgmlType::Q8_K};
    default: return {};
  }
}

}  // namespace

MatmulKernel ternary_kernel_avx512(format::GgmlType type) { return make_kernel<false>(type); }
MatmulKernel ternary_kernel_avx512vnni(format::GgmlType type) { return make_kernel<true>(type); }

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel ternary_kernel_avx512(format::GgmlType) { return {}; }
MatmulKernel ternary_kernel_avx512vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
