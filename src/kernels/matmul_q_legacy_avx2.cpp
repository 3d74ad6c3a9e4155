// Legacy block-quant matmul, Isa::kAvx2 kernels (also used at Isa::kAvx512,
// which has no kernel of its own for these types): Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1 and IQ4_NL weights times Q8-quantized activations (packed by
// legacy_pack_fn, layout in matmul_q_legacy.h).
//
// Per 32-element block and (weight row, activation row): an exact int32 dot
// in 8 lanes — unsigned-code types u = w + off: vpmaddubsw(u, a) (|pair| <=
// 2*31*127, no saturation) + vpmaddwd(1) + the activation's bias lanes
// (-off * sum of the lane's 4 activations); signed types (Q8_0, IQ4_NL): vpmaddubsw(|w|, sign(a, w))
// (|pair| <= 2*128*127 < 2^15). Then the 8 lanes are converted to f32 and
// accumulated lane-wise: acc += f32(sumi) * (d_w * d_a), plus m_w * s_a in
// lane 0 for the _1 types; a fixed-order horizontal sum ends each output.
// Tiles of up to 4 weight rows x 4 activation rows reuse each decoded weight
// block across the activation rows of the tile.
// Tolerance vs the exact double dot of dequantized weight and dequantized
// activation (f16 s for _1 types): (nb + 8) * 2^-23 * sum_b |d_w d_a| sum_j |w_j a_j|
// (+ the m*s terms); results are bit-identical for any tiling / thread count
// and equal to the AVX-512 VNNI kernel's, but differ from the scalar kernel
// (different f32 association).
#include "kernels/type_traits.h"

#if defined(__x86_64__)

#include "kernels/matmul_q4_0_repack.h"
#include "kernels/matmul_q8_0_repack.h"
#include "kernels/matmul_q_legacy.h"
#include "kernels/matmul_tile.h"

#define CHIMERA_T_QAVX2 __attribute__((target("avx2,fma,f16c")))

namespace chimera::kernels::legacy {
namespace {

using format::GgmlType;

template <GgmlType T>
struct KernelAvx2 {
  static constexpr LegacyInfo kInfo = legacy_info(T);
  static constexpr bool kSigned = T == GgmlType::Q8_0 || T == GgmlType::IQ4_NL;

  template <int R, int M>
  CHIMERA_T_QAVX2 static void tile(const GemmArgs& g, int64_t r, int64_t i) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    const size_t ws = g.w_stride, as = g.a_stride;
    const int64_t nb = g.k / 32;
    ActView av[M];
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) av[mm] = act_view(g.a + (size_t)(i + mm) * as, g.k);
    const __m256i tab = x86::iq4nl_table(false);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[rr][mm] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m256i wv[R], wabs[R];
      __m256 dw[R], mw[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        x86::load_block<T, R, M>(w + rr * ws + b * kInfo.bytes, ws, b, tab, wv[rr], dw[rr], mw[rr]);
        if constexpr (kSigned) wabs[rr] = _mm256_sign_epi8(wv[rr], wv[rr]);
      }
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(av[mm].qs + 32 * b));
        const __m256 da = _mm256_load_ps(av[mm].dexp + 8 * b);
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          __m256i q;
          if constexpr (kSigned) {
            q = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs[rr], _mm256_sign_epi8(a, wv[rr])), ones);
          } else {
            q = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[rr], a), ones);
            if constexpr (kInfo.bias != 0) {
              q = _mm256_add_epi32(q, _mm256_load_si256(reinterpret_cast<const __m256i*>(av[mm].bias + 8 * b)));
            }
          }
          x86::accumulate<kInfo.has_min>(q, dw[rr], da, mw[rr], av[mm].sexp + 8 * b, acc[rr][mm]);
        }
      }
    }
    x86::store_tile<R, M>(g, r, i, acc);
  }
};

// 16 ymm registers: R*M accumulators + R weight blocks (+|w|) + scales.
constexpr int kRows = 4, kActs = 4;
constexpr std::array<int, kActs + 1> kRowsFor = {0, 4, 3, 2, 2};

template <GgmlType T>
constexpr detail::TileSet<kRows, kActs> kTiles = detail::make_tile_set<KernelAvx2<T>, kRows, kActs>(kRowsFor);

struct Entries {
  static constexpr const char* kIsa = "avx2";
  template <GgmlType T>
  static void gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
    detail::gemm_blocked(kTiles<T>, g, r0, r1, i0, i1);
  }
};

}  // namespace

MatmulKernel legacy_quant_kernel_avx2(format::GgmlType t) {
  MatmulKernel k = legacy_kernel_for<Entries>(t);
  // Q4_0 and Q8_0 weights are repacked at load into 8-row groups
  // (matmul_q4_0_repack.h, matmul_q8_0_repack.h).
  if (t == GgmlType::Q4_0) q4r::add_repacking(k, q4r::gemm_packed_avx2);
  if (t == GgmlType::Q8_0) q8r::add_repacking(k, q8r::gemm_packed_avx2);
  if (k.pack_act) k.pack_act = legacy_pack_fn_avx2(t);  // same bytes, vectorized
  return k;
}

MatmulKernel legacy_quant_kernel_avx2vnni(format::GgmlType t) {
  if (t != GgmlType::Q4_0 && t != GgmlType::Q8_0) return {};
  MatmulKernel k = legacy_quant_kernel_avx2(t);
  k.gemm_packed = t == GgmlType::Q4_0 ? q4r::gemm_packed_avx2vnni : q8r::gemm_packed_avx2vnni;
  k.name = t == GgmlType::Q4_0 ? "gemm_q4_0_q8_0_avx2vnni" : "gemm_q8_0_q8_0_avx2vnni";
  return k;
}

}  // namespace chimera::kernels::legacy

#else  // !__x86_64__

namespace chimera::kernels::legacy {
MatmulKernel legacy_quant_kernel_avx2(format::GgmlType) { return {}; }
MatmulKernel legacy_quant_kernel_avx2vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels::legacy

#endif
