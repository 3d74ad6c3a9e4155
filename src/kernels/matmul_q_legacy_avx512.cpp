// Legacy block-quant matmul, Isa::kAvx512Vnni kernels (AVX512_VNNI + VL):
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL weights times Q8-quantized
// activations (packed by legacy_pack_fn, layout in matmul_q_legacy.h).
//
// Every weight block is turned into unsigned codes u = w + off (Q8_0 and
// IQ4_NL: off = 128 via xor 0x80 / a +128 codebook; Q4_0 8; Q5_0 16; _1
// types 0) so one vpdpbusd (u8 x s8, no 16-bit intermediate, so no
// saturation) per block and (weight row, activation row) gives the exact
// int32 dot in 8 lanes, its accumulator starting at the activation's bias
// lanes (-off * sum of the lane's 4 activations). Then, as in the AVX2 kernel: acc += f32(sumi) *
// (d_w * d_a) lane-wise (+ m_w * s_a in lane 0 for _1 types) and a
// fixed-order horizontal sum. 256-bit vectors (one block each): on the
// target CPU (Zen 4, 512-bit ops double-pumped) zmm gives no extra
// throughput, and ymm keeps blocks of odd count simple. Tiles up to 8 weight
// rows x 4 activation rows (32 registers).
// Tolerance: as the AVX2 kernel, (nb + 8) * 2^-23 * sum_b |d_w d_a| sum_j |w_j a_j|
// (+ m*s terms); results are tiling/thread independent. AVX2 and VNNI
// kernels compute the same f32 operations in the same order, so they agree
// bit for bit (tested).
#include "kernels/type_traits.h"

#if defined(__x86_64__)

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/matmul_q4_0_repack.h"
#include "kernels/matmul_q8_0_repack.h"
#include "kernels/matmul_q_legacy.h"
#include "kernels/matmul_tile.h"

#define CHIMERA_T_QVNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

namespace chimera::kernels::legacy {
namespace {

using format::GgmlType;

template <GgmlType T>
struct KernelVnni {
  static constexpr LegacyInfo kInfo = legacy_info(T);

  template <int R, int M>
  CHIMERA_T_QVNNI static void tile(const GemmArgs& g, int64_t r, int64_t i) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    const size_t ws = g.w_stride, as = g.a_stride;
    const int64_t nb = g.k / 32;
    ActView av[M];
    CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) av[mm] = act_view(g.a + (size_t)(i + mm) * as, g.k);
    const __m256i tab = x86::iq4nl_table(true);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    __m256 acc[R][M];
    CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) acc[rr][mm] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m256i uv[R];
      __m256 dw[R], mw[R];
      CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
        x86::load_block<T, R, M>(w + rr * ws + b * kInfo.bytes, ws, b, tab, uv[rr], dw[rr], mw[rr]);
        if constexpr (T == GgmlType::Q8_0) uv[rr] = _mm256_xor_si256(uv[rr], flip);
      }
      CHIMERA_UNROLL for (int mm = 0; mm < M; ++mm) {
        const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(av[mm].qs + 32 * b));
        const __m256 da = _mm256_load_ps(av[mm].dexp + 8 * b);
        __m256i init = _mm256_setzero_si256();
        if constexpr (kInfo.bias != 0) init = _mm256_load_si256(reinterpret_cast<const __m256i*>(av[mm].bias + 8 * b));
        CHIMERA_UNROLL for (int rr = 0; rr < R; ++rr) {
          const __m256i q = _mm256_dpbusd_epi32(init, uv[rr], a);
          x86::accumulate<kInfo.has_min>(q, dw[rr], da, mw[rr], av[mm].sexp + 8 * b, acc[rr][mm]);
        }
      }
    }
    x86::store_tile<R, M>(g, r, i, acc);
  }
};

constexpr int kRows = 8, kActs = 4;
constexpr std::array<int, kActs + 1> kRowsFor = {0, 8, 6, 4, 4};

template <GgmlType T>
constexpr detail::TileSet<kRows, kActs> kTiles = detail::make_tile_set<KernelVnni<T>, kRows, kActs>(kRowsFor);

struct Entries {
  static constexpr const char* kIsa = "avx512vnni";
  template <GgmlType T>
  static void gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
    detail::gemm_blocked(kTiles<T>, g, r0, r1, i0, i1);
  }
};

}  // namespace

MatmulKernel legacy_quant_kernel_avx512vnni(format::GgmlType t) {
  MatmulKernel k = legacy_kernel_for<Entries>(t);
  // Q8_0 weights are repacked at load into 8-row groups (matmul_q8_0_repack.h).
  if (t == GgmlType::Q8_0) q8r::add_repacking(k, q8r::gemm_packed_avx512vnni);
  // Q4_0 likewise (matmul_q4_0_repack.h).
  if (t == GgmlType::Q4_0) q4r::add_repacking(k, q4r::gemm_packed_avx512vnni);
  if (k.pack_act) k.pack_act = legacy_pack_fn_avx2(t);  // same bytes, vectorized
  return k;
}

}  // namespace chimera::kernels::legacy

#else  // !__x86_64__

namespace chimera::kernels::legacy {
MatmulKernel legacy_quant_kernel_avx512vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels::legacy

#endif
