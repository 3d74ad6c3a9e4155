// IQ4_XS x Q8_K matmul, Isa::kScalar: the reference for the SIMD kernels —
// straight from the accumulation spec in matmul_iq4xs.h (exact int32 lane
// sums, one fma per lane and super-block, fixed-order horizontal sum).
#include <cmath>

#include "core/fp16.h"
#include "kernels/matmul_iq4xs.h"
#include "kernels/matmul_kquant.h"
#include "quant/legacy_blocks.h"

namespace chimera::kernels::iq4xs {
namespace {

using format::GgmlType;
using quant::block_iq4_xs;
using quant::block_q8_K;

float dot_row(const block_iq4_xs* w, const block_q8_K* a, int64_t nsb) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t b = 0; b < nsb; ++b) {
    int32_t s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const uint8_t* qs = w[b].qs;
    const int8_t* q8 = a[b].qs;
    for (int j = 0; j < 8; ++j, qs += 16, q8 += 32) {
      const int32_t ls = quant::iq4_xs_scale(w[b], j) - 32;
      for (int l = 0; l < 16; ++l) {
        s[l / 4] += ls * quant::kIq4nlValues[qs[l] & 0xF] * q8[l];
        s[4 + l / 4] += ls * quant::kIq4nlValues[qs[l] >> 4] * q8[16 + l];
      }
    }
    const float dd = f16_to_f32(w[b].d) * a[b].d;
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(dd, (float)s[l], acc[l]);
  }
  return finish8(acc);
}

void gemm_scalar(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nsb = g.k / quant::kQK_K;
  for (int64_t r = r0; r < r1; ++r) {
    const auto* w = reinterpret_cast<const block_iq4_xs*>(g.w + (size_t)r * g.w_stride);
    for (int64_t i = i0; i < i1; ++i) {
      const auto* a = reinterpret_cast<const block_q8_K*>(g.a + (size_t)i * g.a_stride);
      g.y[i * g.ldy + r] = dot_row(w, a, nsb);
    }
  }
}

}  // namespace

MatmulKernel kernel_scalar(GgmlType type) {
  if (type != GgmlType::IQ4_XS) return {};
  return {kq_pack_act, kq_act_bytes, gemm_scalar, "gemm_iq4_xs_q8_K_scalar", GgmlType::Q8_K};
}

}  // namespace chimera::kernels::iq4xs
