// AVX2 activation packer of the legacy block-quant kernels (layout in
// matmul_q_legacy.h), used by the AVX2 and AVX-512 VNNI kernel entries:
// the same bytes as the scalar legacy_pack_fn for every input (tested), per
// 32-element block
//   amax = max |x_j| (lane-wise vmaxps with the running maximum second, so a
//          NaN element is skipped like std::max(amax, |x|) does),
//   d = amax / 127, id = amax != 0 ? 127 / amax : 0 (scalar, as there),
//   q_j = vroundps(x_j * id, current mode) = std::nearbyint, vcvtps2dq
//         (out of range / NaN -> INT32_MIN), packs saturation to int8,
//   bias lanes from vpmaddubsw(1, q) + vpmaddwd(1) (the 4-byte group sums),
//   the q sum and the f16-rounded scales as the scalar packer.
// The scalar packer took ~3% of a Q8_0 prefill at m = 256 (perf, AVX2, 2
// threads), this one 0.5%.
#include "kernels/type_traits.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "core/fp16.h"
#include "kernels/matmul_q_legacy.h"

#define CHIMERA_T_QPACK __attribute__((target("avx2,fma,f16c")))

namespace chimera::kernels::legacy {
namespace {

using format::GgmlType;

template <GgmlType T>
CHIMERA_T_QPACK void pack_act_avx2(const float* x, int64_t k, void* out) {
  constexpr LegacyInfo info = legacy_info(T);
  uint8_t* base = static_cast<uint8_t*>(out);
  const int64_t nb = k / 32;
  int8_t* qs = reinterpret_cast<int8_t*>(base);
  float* dexp = reinterpret_cast<float*>(base + k);
  int32_t* bias = reinterpret_cast<int32_t*>(base + k + 32 * nb);
  float* sexp = reinterpret_cast<float*>(base + k + 64 * nb);
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      m = _mm256_max_ps(_mm256_andnot_ps(sign, v[j]), m);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    const float amax = _mm_cvtss_f32(h);
    const float d = amax / 127.f;
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
      q[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], vid), _MM_FROUND_CUR_DIRECTION));
    }
    const __m256i q01 = _mm256_packs_epi32(q[0], q[1]), q23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * b), q8);
    const __m256i sum4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q8), ones16);  // lane l: q[4l..4l+3]
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bias + 8 * b), _mm256_mullo_epi32(sum4, _mm256_set1_epi32(-info.bias)));
    const float dh = f16_to_f32(f32_to_f16(d));
    _mm256_storeu_ps(dexp + 8 * b, _mm256_set1_ps(dh));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(sum4), _mm256_extracti128_si256(sum4, 1));
    t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
    const int sum = _mm_cvtsi128_si32(t);
    const float s = info.has_min ? f16_to_f32(f32_to_f16(d * (float)sum)) : 0.f;
    int32_t s_bits;
    std::memcpy(&s_bits, &s, 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sexp + 8 * b),
                        _mm256_setr_epi32(s_bits, -info.bias * sum, 0, 0, 0, 0, 0, 0));
  }
}

}  // namespace

PackActFn legacy_pack_fn_avx2(format::GgmlType t) {
  return legacy_pick_packer(t, []<GgmlType T>() -> PackActFn { return pack_act_avx2<T>; });
}

}  // namespace chimera::kernels::legacy

#endif
