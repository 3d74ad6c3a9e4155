// AVX-512 matmul kernels: Isa::kAvx512 (F/BW/DQ/VL) for F32, F16 and BF16
// weights (also used at kAvx512Vnni). Hand-written intrinsics in functions
// compiled for those targets only.
//
// Activations: f32 as given for F32 and BF16 weights (BF16 products of exact
// f32 activations: a vdpbf16ps kernel on BF16-rounded activations was tried
// and dropped — it changed logits by ~2.5% of their scale and was not faster
// for prefill on Sapphire Rapids); F16 rounded RNE first (bit-equal to
// pack_f16_as_f32_scalar), as llama.cpp does. One 16-lane f32 accumulator per
// output, element j into lane j % 16 by FMA, tail via masked (zeroing) loads,
// then a fixed-order horizontal sum. Tiles up to 8 weight rows x 6 activations (<= 32 zmm).
#include "kernels/type_traits.h"

#if defined(__x86_64__)

// GCC 12's AVX-512 intrinsics self-initialise "undefined" vectors
// (`__m512 __Y = __Y;`), which -Wuninitialized reports once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/matmul_kquant.h"
#include "kernels/matmul_ternary.h"
#include "kernels/matmul_pack.h"
#include "kernels/matmul_q_legacy.h"
#include "kernels/matmul_tile.h"

#define CHIMERA_T_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define CHIMERA_T_AVX512_INLINE \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) inline

namespace chimera::kernels {
namespace {

using format::GgmlType;

struct WF32 {
  static constexpr int kBytes = 4;
  static constexpr bool kF16Act = false;
  static CHIMERA_T_AVX512_INLINE __m512 load(const uint8_t* row, int64_t j) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + j);
  }
  static CHIMERA_T_AVX512_INLINE __m512 load_tail(const uint8_t* row, int64_t j, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + j);
  }
};

struct WF16 {
  static constexpr int kBytes = 2;
  static constexpr bool kF16Act = true;
  static CHIMERA_T_AVX512_INLINE __m512 load(const uint8_t* row, int64_t j) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j * 2)));
  }
  static CHIMERA_T_AVX512_INLINE __m512 load_tail(const uint8_t* row, int64_t j, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + j * 2));
  }
};

struct WBF16 {
  static constexpr int kBytes = 2;
  static constexpr bool kF16Act = false;
  static CHIMERA_T_AVX512_INLINE __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static CHIMERA_T_AVX512_INLINE __m512 load(const uint8_t* row, int64_t j) {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + j * 2)));
  }
  static CHIMERA_T_AVX512_INLINE __m512 load_tail(const uint8_t* row, int64_t j, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, row + j * 2));
  }
};

// Fixed-order horizontal sum (own sequence rather than _mm512_reduce_add_ps,
// whose GCC 12 expansion trips -Wuninitialized): 512 -> 256 -> 128 -> 1.
CHIMERA_T_AVX512_INLINE float hsum(__m512 v) {
  const __m512 t = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m256 h = _mm512_castps512_ps256(t);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class W>
struct KernelAvx512 {
  // Rows of the GEMV (one activation) tile, and whether the activation row
  // carries an f16 copy (act_bytes_f32_f16 layout) that tile reads instead.
  static constexpr int kGemvRows = W::kF16Act ? 1 : 2;

  template <int R, int M>
  CHIMERA_T_AVX512 static void tile(const GemmArgs& g, int64_t r, int64_t i) {
    if constexpr (M == 1 && W::kF16Act) {
      gemv_f16_act<R>(g, r, i);
      return;
    }
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    const uint8_t* a = g.a + (size_t)i * g.a_stride;
    const size_t ws = g.w_stride, as = g.a_stride;
    const int64_t k = g.k;
    __m512 acc[R][M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[rr][mm] = _mm512_setzero_ps();
    }
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
      // Decode (few activation rows) streams weights once: pull the next row
      // panel into L2 ahead of use, one line per row per 64 bytes consumed.
      if constexpr (M <= 2) {
        if (((j * W::kBytes) & 63) == 0) {
          CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr)
            _mm_prefetch(reinterpret_cast<const char*>(w + (R + rr) * ws + j * W::kBytes), _MM_HINT_T1);
        }
      }
      __m512 wv[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) wv[rr] = W::load(w + rr * ws, j);
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m512 av = _mm512_loadu_ps(reinterpret_cast<const float*>(a + mm * as) + j);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) acc[rr][mm] = _mm512_fmadd_ps(wv[rr], av, acc[rr][mm]);
      }
    }
    if (j < k) {
      const __mmask16 m = (__mmask16)((1u << (k - j)) - 1u);
      __m512 wv[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) wv[rr] = W::load_tail(w + rr * ws, j, m);
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m512 av = _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(a + mm * as) + j);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) acc[rr][mm] = _mm512_fmadd_ps(wv[rr], av, acc[rr][mm]);
      }
    }
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) g.y[(i + mm) * g.ldy + r + rr] = hsum(acc[rr][mm]);
    }
  }

  // One activation, read from its f16 copy: the same products in the same
  // order as the f32 tiles (the copy holds the same values), no software
  // prefetch — one sequential weight stream per row is what the hardware
  // prefetchers follow best (1B F16 decode, Zen 4: +10% over two rows with
  // prefetch and f32 activations, measured interleaved in one process).
  template <int R>
  CHIMERA_T_AVX512_INLINE static void gemv_f16_act(const GemmArgs& g, int64_t r, int64_t i) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    const uint8_t* a = g.a + (size_t)i * g.a_stride + act_f16_copy_offset(g.k);
    const size_t ws = g.w_stride;
    const int64_t k = g.k;
    __m512 acc[R];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) acc[rr] = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 16 <= k; j += 16) {
      const __m512 av = WF16::load(a, j);
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) acc[rr] = _mm512_fmadd_ps(W::load(w + rr * ws, j), av, acc[rr]);
    }
    if (j < k) {
      const __mmask16 m = (__mmask16)((1u << (k - j)) - 1u);
      const __m512 av = WF16::load_tail(a, j, m);
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) acc[rr] = _mm512_fmadd_ps(W::load_tail(w + rr * ws, j, m), av, acc[rr]);
    }
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) g.y[i * g.ldy + r + rr] = hsum(acc[rr]);
  }
};

// Accumulators + weight vectors + one activation must fit in 32 zmm registers.
// GEMV (one activation row): K::kGemvRows rows at a time, i.e. one or two
// weight streams per thread instead of 8 — the streaming rate then follows
// the machine's bandwidth up (1B F16 decode, Zen 4 VM: up to 47 GB/s with 2
// rows vs a ceiling near 35 GB/s with 8). Each output keeps its one
// accumulator chain, so the results are those of every other tile shape.
constexpr int kRows = 8, kActs = 6;
template <class K>
constexpr std::array<int, kActs + 1> kRowsFor = {0, K::kGemvRows, 8, 6, 5, 4, 4};

template <class K>
constexpr detail::TileSet<kRows, kActs> kTiles = detail::make_tile_set<K, kRows, kActs>(kRowsFor<K>);

template <class K>
void gemm_avx512(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  detail::gemm_blocked(kTiles<K>, g, r0, r1, i0, i1);
}

// act_bytes_f32_f16 layout: the RNE-rounded values as f32, then as f16.
CHIMERA_T_AVX512 void pack_f16_dual_avx512(const float* x, int64_t k, void* out) {
  float* o = static_cast<float*>(out);
  uint16_t* h16 = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(out) + act_f16_copy_offset(k));
  int64_t j = 0;
  for (; j + 16 <= k; j += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_loadu_ps(x + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h16 + j), h);
    _mm512_storeu_ps(o + j, _mm512_cvtph_ps(h));
  }
  for (; j < k; ++j) {
    h16[j] = f32_to_f16(x[j]);
    o[j] = f16_to_f32(h16[j]);
  }
}

}  // namespace

MatmulKernel matmul_kernel_avx512(format::GgmlType type) {
  if (MatmulKernel k = kquant_kernel_avx512(type); k.gemm) return k;  // Q2_K..Q6_K
  if (MatmulKernel k = ternary_kernel_avx512(type); k.gemm) return k;  // TQ1_0/TQ2_0
  switch (type) {
    case GgmlType::F32: return {nullptr, nullptr, gemm_avx512<KernelAvx512<WF32>>, "gemm_f32_f32_avx512"};
    case GgmlType::F16:
      return {pack_f16_dual_avx512, act_bytes_f32_f16, gemm_avx512<KernelAvx512<WF16>>, "gemm_f16_f16_avx512"};
    case GgmlType::BF16:
      return {nullptr, nullptr, gemm_avx512<KernelAvx512<WBF16>>, "gemm_bf16_f32_avx512"};
    default: return {};
  }
}

MatmulKernel matmul_kernel_avx512vnni(format::GgmlType type) {
  if (MatmulKernel k = legacy::legacy_quant_kernel_avx512vnni(type); k.gemm) return k;  // Q8_0/Q4_x/Q5_x/IQ4_NL
  if (MatmulKernel k = kquant_kernel_avx512vnni(type); k.gemm) return k;                  // Q2_K..Q6_K
  if (MatmulKernel k = ternary_kernel_avx512vnni(type); k.gemm) return k;  // TQ1_0/TQ2_0
  switch (type) {
    default: return {};  // F32/F16/BF16 use the kAvx512 kernels
  }
}

MatmulKernel matmul_kernel_amx(format::GgmlType type) { return kquant_kernel_amx(type); }  // Q4_K

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel matmul_kernel_avx512(format::GgmlType) { return {}; }
MatmulKernel matmul_kernel_avx512vnni(format::GgmlType) { return {}; }
MatmulKernel matmul_kernel_amx(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
