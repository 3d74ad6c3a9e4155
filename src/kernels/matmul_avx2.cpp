// AVX2 + FMA + F16C matmul kernels (Isa::kAvx2), hand-written intrinsics in
// functions compiled for that target only (the build has no -march flags).
// Layout: activations as f32 (F16 activations rounded RNE first, exactly as
// pack_f16_as_f32_scalar does; F32 and BF16 weights take them as given). Accumulation: one 8-lane f32 accumulator
// per output, element j into lane j % 8 with FMA (exact products for F16/BF16
// operands), tail lanes zero-filled, then a fixed horizontal sum
// (hi128 + lo128, then pairwise). Tiles of up to 6 weight rows x 4 activations.
#include "kernels/type_traits.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <cstring>

#include "kernels/matmul_kquant.h"
#include "kernels/matmul_ternary.h"
#include "kernels/matmul_pack.h"
#include "kernels/matmul_q_legacy.h"
#include "kernels/matmul_tile.h"

#define CHIMERA_T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define CHIMERA_T_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace chimera::kernels {
namespace {

using format::GgmlType;

struct WF32 {
  static CHIMERA_T_AVX2_INLINE __m256 load(const uint8_t* row, int64_t j) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + j);
  }
  static CHIMERA_T_AVX2_INLINE __m256 load_tail(const uint8_t* row, int64_t j, int n, __m256i mask) {
    return _mm256_maskload_ps(reinterpret_cast<const float*>(row) + j, mask);
  }
};

struct WF16 {
  static CHIMERA_T_AVX2_INLINE __m256 load(const uint8_t* row, int64_t j) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j * 2)));
  }
  static CHIMERA_T_AVX2_INLINE __m256 load_tail(const uint8_t* row, int64_t j, int n, __m256i) {
    uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, row + j * 2, (size_t)n * 2);
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf)));
  }
};

struct WBF16 {
  static CHIMERA_T_AVX2_INLINE __m256 widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static CHIMERA_T_AVX2_INLINE __m256 load(const uint8_t* row, int64_t j) {
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j * 2)));
  }
  static CHIMERA_T_AVX2_INLINE __m256 load_tail(const uint8_t* row, int64_t j, int n, __m256i) {
    uint16_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, row + j * 2, (size_t)n * 2);
    return widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf)));
  }
};

CHIMERA_T_AVX2_INLINE float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class W>
struct KernelAvx2 {
  template <int R, int M>
  CHIMERA_T_AVX2 static void tile(const GemmArgs& g, int64_t r, int64_t i) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    const uint8_t* a = g.a + (size_t)i * g.a_stride;
    const size_t ws = g.w_stride, as = g.a_stride;
    const int64_t k = g.k;
    __m256 acc[R][M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[rr][mm] = _mm256_setzero_ps();
    }
    int64_t j = 0;
    for (; j + 8 <= k; j += 8) {
      __m256 wv[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) wv[rr] = W::load(w + rr * ws, j);
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m256 av = _mm256_loadu_ps(reinterpret_cast<const float*>(a + mm * as) + j);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) acc[rr][mm] = _mm256_fmadd_ps(wv[rr], av, acc[rr][mm]);
      }
    }
    if (j < k) {
      const int n = (int)(k - j);
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256 wv[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) wv[rr] = W::load_tail(w + rr * ws, j, n, mask);
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m256 av = _mm256_maskload_ps(reinterpret_cast<const float*>(a + mm * as) + j, mask);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) acc[rr][mm] = _mm256_fmadd_ps(wv[rr], av, acc[rr][mm]);
      }
    }
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) g.y[(i + mm) * g.ldy + r + rr] = hsum(acc[rr][mm]);
    }
  }
};

// Accumulators + weight vectors + one activation must fit in 16 ymm registers.
constexpr int kRows = 6, kActs = 4;
template <class W>
constexpr detail::TileSet<kRows, kActs> kTiles =
    detail::make_tile_set<KernelAvx2<W>, kRows, kActs>({0, 6, 4, 3, 3});

template <class W>
void gemm_avx2(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  detail::gemm_blocked(kTiles<W>, g, r0, r1, i0, i1);
}

CHIMERA_T_AVX2 void pack_f16_as_f32_avx2(const float* x, int64_t k, void* out) {
  float* o = static_cast<float*>(out);
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(o + j, _mm256_cvtph_ps(h));
  }
  pack_f16_as_f32_scalar(x + j, k - j, o + j);
}

}  // namespace

MatmulKernel matmul_kernel_avx2(format::GgmlType type) {
  if (MatmulKernel k = legacy::legacy_quant_kernel_avx2(type); k.gemm) return k;  // Q8_0/Q4_x/Q5_x/IQ4_NL
  if (MatmulKernel k = kquant_kernel_avx2(type); k.gemm) return k;                  // Q2_K..Q6_K
  if (MatmulKernel k = ternary_kernel_avx2(type); k.gemm) return k;  // TQ1_0/TQ2_0
  switch (type) {
    case GgmlType::F32: return {nullptr, nullptr, gemm_avx2<WF32>, "gemm_f32_f32_avx2"};
    case GgmlType::F16: return {pack_f16_as_f32_avx2, act_bytes_f32, gemm_avx2<WF16>, "gemm_f16_f16_avx2"};
    case GgmlType::BF16: return {nullptr, nullptr, gemm_avx2<WBF16>, "gemm_bf16_f32_avx2"};
    default: return {};
  }
}

// Isa::kAvx2Vnni: the types with VEX-VNNI kernels of their own (Q4_K, Q8_0,
// Q4_0, TQ2_0, TQ1_0); the others fall back to Isa::kAvx2 (type_traits.cpp).
MatmulKernel matmul_kernel_avx2vnni(format::GgmlType type) {
  if (MatmulKernel k = legacy::legacy_quant_kernel_avx2vnni(type); k.gemm) return k;
  if (MatmulKernel k = ternary_kernel_avx2vnni(type); k.gemm) return k;
  return kquant_kernel_avx2vnni(type);
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel matmul_kernel_avx2(format::GgmlType) { return {}; }
MatmulKernel matmul_kernel_avx2vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
