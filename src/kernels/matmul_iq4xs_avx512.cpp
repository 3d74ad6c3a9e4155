// IQ4_XS x Q8_K matmul, Isa::kAvx512 (F/BW/DQ/VL) and Isa::kAvx512Vnni.
// Per half super-block (4 sub-blocks of 32): one 64-byte load of the 4-bit
// indices, low nibbles = elements 0..15 of each sub-block, high nibbles =
// elements 16..31; pack_act_regrouped stores the Q8_K activations in that
// order, so no shuffles are needed in the loop. vpshufb of the |codebook|
// gives |w|; the activations are negated where the index is < 8 (the negative
// codebook entries: one vptestnmb mask + masked vpsubb). vpmaddubsw(|w|, ±a)
// -> int16 pairs (|pair| <= 2*127*127, no saturation), then the per-128-bit
// lane sub-block scales (ls - 32, decoded once per block with vpsrlvd and
// picked by vpshufb) by vpmaddwd + vpaddd, or one vpdpwssd on VNNI. The
// exact int32 lanes are folded into the 8 AVX2 lanes of matmul_iq4xs.h and
// the f32 steps are the AVX2 kernel's: results are bit-identical to
// Isa::kScalar / kAvx2 (and to llama.cpp's AVX2 ggml_vec_dot_iq4_xs_q8_K).
// Tiles: GEMV 4 weight rows x 1 activation row with an L2 prefetch of the
// next 4 rows; batches 1 weight row x 4 activation rows. Rows in groups of 16
// are repacked at load into the x16 layout and run the x16 kernel
// (matmul_iq4xs_x16_avx512.cpp, same activations, same bits); this one serves
// the rows of a tensor past its last whole group and CHIMERA_REPACK=0.
// Tolerance: matmul_iq4xs.h.
#include "kernels/matmul_iq4xs.h"

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

#include "core/fp16.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_kquant_x16.h"

#define CHIMERA_T_IQ4512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#define CHIMERA_T_IQ4512_INLINE \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) inline

namespace chimera::kernels::iq4xs {
namespace {

using format::GgmlType;
using quant::block_iq4_xs;
using quant::block_q8_K;

// |kIq4nlValues|; entries 0..7 are the negative ones.
alignas(16) constexpr uint8_t kAbsValues[16] = {127, 104, 83, 65, 49, 35, 22, 10, 1, 13, 25, 38, 53, 69, 89, 113};

// s + madd(p16, ls). VNNI: vpdpwssd via inline asm, so both kernels share one
// body under the plain AVX-512 target (a VNNI target attribute would let the
// compiler emit VNNI in the kAvx512 kernel too).
template <bool kVnni>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i acc_scaled(__m512i s, __m512i p16,
                                                                                      __m512i ls) {
  if constexpr (kVnni) {
    __asm__("vpdpwssd %2, %1, %0" : "+v"(s) : "v"(p16), "v"(ls));
    return s;
  } else {
    return _mm512_add_epi32(s, _mm512_madd_epi16(p16, ls));
  }
}

// vpshufb controls: 128-bit lane c gets scale word c (kPickLo) / 4 + c (kPickHi)
// of [ls_0 .. ls_7] broadcast to every lane.
constexpr uint8_t pick_byte(int i, int base) { return (uint8_t)(2 * (base + i / 16) + (i % 2)); }
template <int kBase, size_t... I>
constexpr std::array<uint8_t, 64> make_pick(std::index_sequence<I...>) {
  return {pick_byte((int)I, kBase)...};
}
alignas(64) constexpr std::array<uint8_t, 64> kPickLo = make_pick<0>(std::make_index_sequence<64>{});
alignas(64) constexpr std::array<uint8_t, 64> kPickHi = make_pick<4>(std::make_index_sequence<64>{});

// The 8 sub-block scales (ls - 32) of one block as int16 words, broadcast to
// every 128-bit lane.
CHIMERA_T_IQ4512_INLINE __m512i block_scales(const block_iq4_xs& blk) {
  uint32_t sl;
  std::memcpy(&sl, blk.scales_l, 4);
  const __m256i lo_shift = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i hi_shift = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), lo_shift), _mm256_set1_epi32(0xF));
  const __m256i hi =
      _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(blk.scales_h), hi_shift), _mm256_set1_epi32(3));
  const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
  return _mm512_broadcast_i32x4(_mm256_cvtepi32_epi16(ls));
}

// Activation packing of the AVX-512 kernels: block_q8_K with the int8 values
// of each half super-block (4 sub-blocks of 32) regrouped as
// X = [e0..15 of sub-blocks 0,1,2,3] then Y = [e16..31 of the same], i.e.
// 16-byte chunks in the order 0,2,4,6,1,3,5,7 (d and bsums unchanged; same
// integers as quantize_row_q8_K, so results match the other ISAs).
void pack_act_regrouped(const float* x, int64_t k, void* out) {
  kq_pack_act_avx2(x, k, out);
  auto* blk = static_cast<block_q8_K*>(out);
  for (int64_t b = 0; b < k / quant::kQK_K; ++b) {
    for (int h = 0; h < 2; ++h) {
      int8_t tmp[128];
      int8_t* q = blk[b].qs + 128 * h;
      for (int c = 0; c < 8; ++c) std::memcpy(tmp + 16 * c, q + 16 * ((c % 4) * 2 + c / 4), 16);
      std::memcpy(q, tmp, 128);
    }
  }
}

// R weight rows x M activation rows. Per half super-block h (sub-blocks
// 4h..4h+3): one 64-byte load of the indices gives the low nibbles
// [lo_4h | lo_4h+1 | lo_4h+2 | lo_4h+3] and the high nibbles likewise, which
// match the regrouped activations X and Y. Int32 lane 4c + l of the X (Y)
// sums is the AVX2 lane l (4 + l) part of sub-block c.
template <bool kVnni, int R, int M>
CHIMERA_T_IQ4512 void tile(const GemmArgs& g, int64_t nsb, int64_t r, int64_t i) {
  const __m512i absv = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kAbsValues)));
  const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(0x08);
  const __m512i pick[2] = {_mm512_load_si512(kPickLo.data()), _mm512_load_si512(kPickHi.data())};
  const block_iq4_xs* w[R];
  for (int q = 0; q < R; ++q) w[q] = reinterpret_cast<const block_iq4_xs*>(g.w + (size_t)(r + q) * g.w_stride);
  const block_q8_K* a[M];
  for (int t = 0; t < M; ++t) a[t] = reinterpret_cast<const block_q8_K*>(g.a + (size_t)(i + t) * g.a_stride);
  __m256 acc[R][M];
  for (int q = 0; q < R; ++q)
    for (int t = 0; t < M; ++t) acc[q][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nsb; ++b) {
    __m512i sx[R][M], sy[R][M], ls_all[R];
    for (int q = 0; q < R; ++q) {
      if constexpr (M == 1) {
        // GEMV streams the weights from DRAM: prefetch the next tile's block
        // into L2 (the hardware prefetcher does not follow R interleaved rows).
        const uint8_t* pf = reinterpret_cast<const uint8_t*>(w[q] + b) + (size_t)R * g.w_stride;
        for (int o = 0; o < (int)sizeof(block_iq4_xs); o += 64) __builtin_prefetch(pf + o, 0, 2);
      }
      ls_all[q] = block_scales(w[q][b]);
      for (int t = 0; t < M; ++t) sx[q][t] = sy[q][t] = _mm512_setzero_si512();
    }
    for (int h = 0; h < 2; ++h) {
      __m512i x[M], y[M];
      for (int t = 0; t < M; ++t) {
        x[t] = _mm512_loadu_si512(a[t][b].qs + 128 * h);
        y[t] = _mm512_loadu_si512(a[t][b].qs + 128 * h + 64);
      }
      for (int q = 0; q < R; ++q) {
        const __m512i z = _mm512_loadu_si512(w[q][b].qs + 64 * h);
        const __m512i il = _mm512_and_si512(z, m4), ih = _mm512_and_si512(_mm512_srli_epi16(z, 4), m4);
        const __m512i wl = _mm512_shuffle_epi8(absv, il), wh = _mm512_shuffle_epi8(absv, ih);
        const __mmask64 nl = _mm512_testn_epi8_mask(il, eight), nh = _mm512_testn_epi8_mask(ih, eight);
        const __m512i ls = _mm512_shuffle_epi8(ls_all[q], pick[h]);
        for (int t = 0; t < M; ++t) {
          const __m512i sxv = _mm512_mask_sub_epi8(x[t], nl, _mm512_setzero_si512(), x[t]);
          const __m512i syv = _mm512_mask_sub_epi8(y[t], nh, _mm512_setzero_si512(), y[t]);
          sx[q][t] = acc_scaled<kVnni>(sx[q][t], _mm512_maddubs_epi16(wl, sxv), ls);
          sy[q][t] = acc_scaled<kVnni>(sy[q][t], _mm512_maddubs_epi16(wh, syv), ls);
        }
      }
    }
    for (int q = 0; q < R; ++q) {
      const float dw = f16_to_f32(w[q][b].d);
      for (int t = 0; t < M; ++t) {
        // Sum the 4 sub-block chunks: [S_0..3 | S_4..7] (exact int32).
        const __m256i zx = _mm256_add_epi32(_mm512_castsi512_si256(sx[q][t]), _mm512_extracti64x4_epi64(sx[q][t], 1));
        const __m256i zy = _mm256_add_epi32(_mm512_castsi512_si256(sy[q][t]), _mm512_extracti64x4_epi64(sy[q][t], 1));
        const __m256i s8 =
            _mm256_add_epi32(_mm256_permute2x128_si256(zx, zy, 0x20), _mm256_permute2x128_si256(zx, zy, 0x31));
        acc[q][t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[t][b].d), _mm256_cvtepi32_ps(s8), acc[q][t]);
      }
    }
  }
  for (int q = 0; q < R; ++q) {
    for (int t = 0; t < M; ++t) {
      alignas(32) float lanes[8];
      _mm256_store_ps(lanes, acc[q][t]);
      g.y[(i + t) * g.ldy + r + q] = finish8(lanes);
    }
  }
}

// GEMV (one activation row): tiles of 4 weight rows; batches: 1 weight row x
// 4 activation rows.
template <bool kVnni>
CHIMERA_T_IQ4512 void gemm_avx512(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nsb = g.k / quant::kQK_K;
  if (i1 - i0 == 1) {
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) tile<kVnni, 4, 1>(g, nsb, r, i0);
    switch (r1 - r) {
      case 3: tile<kVnni, 3, 1>(g, nsb, r, i0); break;
      case 2: tile<kVnni, 2, 1>(g, nsb, r, i0); break;
      case 1: tile<kVnni, 1, 1>(g, nsb, r, i0); break;
      default: break;
    }
    return;
  }
  const int64_t ib_rows = act_block_rows(g.a_stride, 4);
  for (int64_t ib = i0; ib < i1; ib += ib_rows) {
    const int64_t ie = std::min(i1, ib + ib_rows);
    for (int64_t r = r0; r < r1; ++r) {
      int64_t i = ib;
      for (; i + 4 <= ie; i += 4) tile<kVnni, 1, 4>(g, nsb, r, i);
      switch (ie - i) {
        case 3: tile<kVnni, 1, 3>(g, nsb, r, i); break;
        case 2: tile<kVnni, 1, 2>(g, nsb, r, i); break;
        case 1: tile<kVnni, 1, 1>(g, nsb, r, i); break;
        default: break;
      }
    }
  }
}

}  // namespace

// Rows in groups of 16 are repacked at load into the x16 layout
// (matmul_kquant_x16.h; kernel in matmul_iq4xs_x16_avx512.cpp, same
// activations, same bits).
MatmulKernel kernel_avx512(GgmlType type) {
  if (type != GgmlType::IQ4_XS) return {};
  MatmulKernel k{pack_act_regrouped, kq_act_bytes, gemm_avx512<false>, "gemm_iq4_xs_q8_K_avx512", GgmlType::Q8_K};
  kq_x16_set_repack(type, kq_x16_gemm_avx512(type, false), k);
  return k;
}

MatmulKernel kernel_avx512vnni(GgmlType type) {
  if (type != GgmlType::IQ4_XS) return {};
  MatmulKernel k{pack_act_regrouped, kq_act_bytes, gemm_avx512<true>, "gemm_iq4_xs_q8_K_avx512vnni", GgmlType::Q8_K};
  kq_x16_set_repack(type, kq_x16_gemm_avx512(type, true), k);
  return k;
}

}  // namespace chimera::kernels::iq4xs

#else  // !__x86_64__

namespace chimera::kernels::iq4xs {
MatmulKernel kernel_avx512(format::GgmlType) { return {}; }
MatmulKernel kernel_avx512vnni(format::GgmlType) { return {}; }
}  // namespace chimera::kernels::iq4xs

#endif
