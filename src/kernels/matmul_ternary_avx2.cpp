// AVX2 ternary matmul kernels (Isa::kAvx2): TQ1_0 / TQ2_0 / I2_S weights x
// Q8_K activations, bit-identical to Isa::kScalar (matmul_ternary.h).
//   TQ2_0 / I2_S: TqAct8 plane-order activations; per 256 elements two 32-byte
//   loads, plane n of half h = (x_h >> shift_n) & 3 (TQ2_0 2n, I2_S 6 - 2n)
//   against activation bytes 64n + 32h; vpmaddubsw (trits u8 0..2 x s8, no
//   saturation), the 8 products of a block summed in int16, one vpmaddwd(1)
//   -> int32 lane l of class l. GEMV (m == 1)
//   decodes in registers with an L2 prefetch of the rows ahead; GEMM decodes
//   each row once into a plane-order panel.
//   Repacked TQ2_0 / TQ1_0 (2-bit grouped layout, matmul_ternary.h): the same
//   planes_dot per row and block over one contiguous buffer, kTqGroup rows per
//   pass. TQ1_0 runs on TqAct8 (repacked, or re-encoded per row when not).
//   TQ1_0 with CHIMERA_TQ1_2BIT=0: block_q8_K activations, each weight row
//   decoded once per call into natural-order trits (shared scalar decoder),
//   8 chunks of 32 per block.
// Then minus the lane-class corrections, vfmadd into 8 f32 lanes and the
// fixed reduction of matmul_ternary.h.
#include "kernels/matmul_ternary.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_kquant.h"

#define CHIMERA_T_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

// ---- TQ2_0 / I2_S on plane-order activations.
// The eight vpmaddubsw results of a block are summed in int16 before one
// vpmaddwd: each int16 lane is t0*a0 + t1*a1 with t in 0..2 and |a| <= 128,
// so |lane| <= 512 and eight of them stay within 4096 — exact, and the int16
// lanes keep their lane class, so the int32 S_l are the same. One vpmaddwd and
// one 32-bit add per block instead of eight each (the GEMV is compute-bound
// on AVX2: 2 vector ports, no VNNI).
template <bool kI2s>
CHIMERA_T_AVX2 inline __m256i planes_dot(const uint8_t* blk, const TqAct8& a) {
  const __m256i mask = _mm256_set1_epi8(3);
  const __m256i x0 = _mm256_loadu_si256((const __m256i*)blk);
  const __m256i x1 = _mm256_loadu_si256((const __m256i*)(blk + 32));
  __m256i s = _mm256_setzero_si256();
  for (int n = 0; n < 4; ++n) {
    const int sh = kI2s ? 6 - 2 * n : 2 * n;
    const __m256i t0 = _mm256_and_si256(sh ? _mm256_srli_epi16(x0, sh) : x0, mask);
    const __m256i t1 = _mm256_and_si256(sh ? _mm256_srli_epi16(x1, sh) : x1, mask);
    const __m256i y0 = _mm256_load_si256((const __m256i*)(a.qs + 64 * n));
    const __m256i y1 = _mm256_load_si256((const __m256i*)(a.qs + 64 * n + 32));
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(t0, y0));
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(t1, y1));
  }
  return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

CHIMERA_T_AVX2 inline __m256 plane_update(__m256i s, const TqAct8& a, float d, __m256 acc) {
  s = _mm256_sub_epi32(s, _mm256_load_si256((const __m256i*)a.corr));
  return _mm256_fmadd_ps(_mm256_set1_ps(a.d * d), _mm256_cvtepi32_ps(s), acc);
}

CHIMERA_T_AVX2 inline float lanes_finish(__m256 acc) {
  alignas(32) float l[8];
  _mm256_store_ps(l, acc);
  return detail::tq_finish(l);
}

// One weight row's blocks as 64-byte code units (TQ2_0 qs order, or I2_S as
// stored) and their block scales; per thread, grown on demand.
struct RowPanel {
  std::vector<uint8_t> qs;
  std::vector<float> dd;
  uint8_t* block(int64_t sb) { return &qs[(size_t)sb * 64]; }
};

inline RowPanel& row_panel(int64_t nsb) {
  thread_local RowPanel p;
  if (p.dd.size() < (size_t)nsb) {
    p.qs.resize((size_t)nsb * 64);
    p.dd.resize((size_t)nsb);
  }
  return p;
}

// y[i][r] for every activation row i in [i0, i1) from row r's panel; the
// decode stays in registers (two shifts per 64 elements are cheaper than
// reloading decoded planes).
template <bool kI2s>
CHIMERA_T_AVX2 void panel_rows(RowPanel& pr, const GemmArgs& g, int64_t nsb, int64_t i0, int64_t i1, int64_t r) {
  for (int64_t i = i0; i < i1; ++i) {
    const auto* act = reinterpret_cast<const TqAct8*>(g.a + (size_t)i * g.a_stride);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t sb = 0; sb < nsb; ++sb)
      acc = plane_update(planes_dot<kI2s>(pr.block(sb), act[sb]), act[sb], pr.dd[(size_t)sb], acc);
    g.y[i * g.ldy + r] = lanes_finish(acc);
  }
}

template <bool kI2s>
CHIMERA_T_AVX2 void gemm_planes(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  constexpr size_t kBytes = kI2s ? 64 : sizeof(q::block_tq2_0);
  const int64_t nsb = g.k / q::kQK_K;
  float ts = 0.f;
  if (kI2s) std::memcpy(&ts, g.w_tail, sizeof(ts));
  if (i1 - i0 == 1) {
    const auto* act = reinterpret_cast<const TqAct8*>(g.a + (size_t)i0 * g.a_stride);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* w = g.w + (size_t)r * g.w_stride;
      const uint8_t* pf = w + std::max<size_t>(2, (4096 + g.w_stride - 1) / g.w_stride) * g.w_stride;  // >= 4 KiB ahead
      __m256 acc = _mm256_setzero_ps();
      for (int64_t sb = 0; sb < nsb; ++sb) {
        const uint8_t* blk = w + (size_t)sb * kBytes;
        _mm_prefetch((const char*)(pf + (size_t)sb * kBytes), _MM_HINT_T1);
        float d = ts;
        if (!kI2s) {
          uint16_t h;
          std::memcpy(&h, blk + 64, 2);
          d = _cvtsh_ss(h);
        }
        acc = plane_update(planes_dot<kI2s>(blk, act[sb]), act[sb], d, acc);
      }
      _mm_prefetch((const char*)(pf + (size_t)nsb * kBytes - 1), _MM_HINT_T1);
      g.y[i0 * g.ldy + r] = lanes_finish(acc);
    }
    return;
  }
  // Panel: the row's blocks copied to 64-byte units so every activation row
  // reuses one contiguous copy.
  RowPanel& pr = row_panel(nsb);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      std::memcpy(pr.block(sb), w + (size_t)sb * kBytes, 64);
      if (kI2s) {
        pr.dd[(size_t)sb] = ts;
      } else {
        uint16_t h;
        std::memcpy(&h, w + (size_t)sb * kBytes + 64, 2);
        pr.dd[(size_t)sb] = _cvtsh_ss(h);
      }
    }
    panel_rows<kI2s>(pr, g, nsb, i0, i1, r);
  }
}

// ---- TQ1_0 on block_q8_K activations.
CHIMERA_T_AVX2 float dot_avx2(const TqDecoded* w, const float* wd, const uint8_t* act, int64_t nsb) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* y = act + (size_t)sb * sizeof(q::block_q8_K);
    const int8_t* qs = (const int8_t*)(y + 4);
    __m256i s = _mm256_setzero_si256();
    for (int c = 0; c < 8; ++c) {
      const __m256i t = _mm256_load_si256((const __m256i*)(w[sb].t + 32 * c));
      const __m256i a = _mm256_loadu_si256((const __m256i*)(qs + 32 * c));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(t, a), ones));
    }
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

// ---- Repacked TQ2_0 / TQ1_0 (2-bit grouped layout, matmul_ternary.h) and
// TQ1_0 on TqAct8 in storage layout. Same planes_dot / plane_update per row
// and block as gemm_planes: bit-identical to it and to Isa::kScalar.
CHIMERA_T_AVX2 inline float f16_bits(uint16_t h) { return _cvtsh_ss(h); }

CHIMERA_T_AVX2 void gemm_packed(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  constexpr int G = kTqGroup;
  const int64_t nsb = g.k / q::kQK_K;
  const size_t sc_bytes = tq_packed_scale_bytes(g.k);
  const size_t group_bytes = (size_t)G * g.w_stride;
  for (int64_t r = r0; r < r1; r += G) {
    const uint8_t* grp = g.w + (size_t)(r / G) * group_bytes;
    const auto* sc = reinterpret_cast<const uint16_t*>(grp);
    const uint8_t* qs = grp + sc_bytes;
    for (int64_t i = i0; i < i1; ++i) {
      const auto* act = reinterpret_cast<const TqAct8*>(g.a + (size_t)i * g.a_stride);
      __m256 acc[G];
      for (int j = 0; j < G; ++j) acc[j] = _mm256_setzero_ps();
      for (int64_t sb = 0; sb < nsb; ++sb) {
        for (int j = 0; j < G; ++j) {
          acc[j] = plane_update(planes_dot<false>(qs + (size_t)(sb * G + j) * 64, act[sb]), act[sb],
                                f16_bits(sc[sb * G + j]), acc[j]);
        }
      }
      for (int j = 0; j < G; ++j) g.y[i * g.ldy + r + j] = lanes_finish(acc[j]);
    }
  }
}

CHIMERA_T_AVX2 void gemm_tq1_act8(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nsb = g.k / q::kQK_K;
  RowPanel& pr = row_panel(nsb);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t sb = 0; sb < nsb; ++sb)
      pr.dd[(size_t)sb] = f16_bits(tq1_0_to_tq2_qs(w + (size_t)sb * sizeof(q::block_tq1_0), pr.block(sb)));
    panel_rows<false>(pr, g, nsb, i0, i1, r);
  }
}

}  // namespace

MatmulKernel ternary_kernel_avx2(format::GgmlType type) {
  switch (type) {
    case GgmlType::TQ1_0: {
      if (!tq1_as_2bit()) {
        return {kq_pack_act, kq_act_bytes, detail::tq_gemm<tq1_0_decode, sizeof(q::block_tq1_0), dot_avx2>,
                "gemm_tq1_0_q8_K_avx2", GgmlType::Q8_K};
      }
      MatmulKernel k{tq_pack_act8, tq_act8_bytes, gemm_tq1_act8, "gemm_tq1_0_q8_K_avx2_2bit", GgmlType::Q8_K};
      tq_add_repacking(k, tq1_0_repack, gemm_packed);
      return k;
    }
    case GgmlType::TQ2_0: {
      MatmulKernel k{tq_pack_act8, tq_act8_bytes, gemm_planes<false>, "gemm_tq2_0_q8_K_avx2", GgmlType::Q8_K};
      tq_add_repacking(k, tq2_0_repack, gemm_packed);
      return k;
    }
    case GgmlType::I2_S:
      return {tq_pack_act8, tq_act8_bytes, gemm_planes<true>, "gemm_i2_s_q8_K_avx2", GgmlType::Q8_K};
    default: return {};
  }
}

}  // namespace chimera::kernels

#else  // !__x86_64__

namespace chimera::kernels {
MatmulKernel ternary_kernel_avx2(format::GgmlType) { return {}; }
}  // namespace chimera::kernels

#endif
