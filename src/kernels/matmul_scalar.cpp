// Portable matmul kernels (Isa::kScalar, and the fallback on CPUs without a
// SIMD implementation, NEON included for now). Same contract as the SIMD
// kernels: activations rounded to the vec_dot type (kept as f32 values, which
// is exact for F16; BF16 weights take f32 activations as given), each output accumulated in f32 in 8 interleaved
// lanes (element j goes to lane j % 8) and the lanes summed pairwise in a
// fixed order, so y[i][r] depends only on its operands.
#include <cstring>

#include "core/fp16.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_ternary.h"
#include "kernels/matmul_pack.h"
#include "kernels/matmul_q_legacy.h"
#include "kernels/type_traits.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;

struct LoadF32 {
  static float get(const uint8_t* row, int64_t j) {
    float v;
    std::memcpy(&v, row + j * 4, 4);
    return v;
  }
};
// Branch-free binary16 -> f32 (fp16.h's f16_to_f32 branches per element,
// which keeps the compiler from vectorizing): place exponent and mantissa in
// an f32 with the f16 bias, scale by 2^112 (exact, and turns f16 subnormals
// into f32 normals), then force the exponent to all-ones for inf/NaN.
// Bit-identical to f16_to_f32 for all 65536 inputs (tested via the scalar ISA).
struct LoadF16 {
  static float get(const uint8_t* row, int64_t j) {
    uint16_t h;
    std::memcpy(&h, row + j * 2, 2);
    const float scaled = f32_from_bits((uint32_t)(h & 0x7fffu) << 13) * 0x1p112f;
    uint32_t u = bits_from_f32(scaled);
    u |= scaled >= 65536.f ? 0x7f800000u : 0u;
    return f32_from_bits(u | (uint32_t)(h & 0x8000u) << 16);
  }
};
struct LoadBF16 {
  static float get(const uint8_t* row, int64_t j) {
    uint16_t h;
    std::memcpy(&h, row + j * 2, 2);
    return bf16_to_f32(h);
  }
};

template <class W>
float dot_lanes8(const uint8_t* w, const float* a, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= k; j += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += W::get(w, j + l) * a[j + l];
  }
  for (int l = 0; j + l < k; ++l) acc[l] += W::get(w, j + l) * a[j + l];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

template <class W>
void gemm_scalar(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t i = i0; i < i1; ++i) {
      const auto* a = reinterpret_cast<const float*>(g.a + (size_t)i * g.a_stride);
      g.y[i * g.ldy + r] = dot_lanes8<W>(w, a, g.k);
    }
  }
}

}  // namespace

MatmulKernel matmul_kernel_scalar(format::GgmlType type) {
  if (MatmulKernel k = legacy::legacy_quant_kernel_scalar(type); k.gemm) return k;  // Q8_0/Q4_x/Q5_x/IQ4_NL
  if (MatmulKernel k = kquant_kernel_scalar(type); k.gemm) return k;                  // Q2_K..Q6_K
  if (MatmulKernel k = ternary_kernel_scalar(type); k.gemm) return k;  // TQ1_0/TQ2_0
  switch (type) {
    case GgmlType::F32: return {nullptr, nullptr, gemm_scalar<LoadF32>, "gemm_f32_f32_scalar"};
    case GgmlType::F16: return {pack_f16_as_f32_scalar, act_bytes_f32, gemm_scalar<LoadF16>, "gemm_f16_f16_scalar"};
    case GgmlType::BF16:
      return {nullptr, nullptr, gemm_scalar<LoadBF16>, "gemm_bf16_f32_scalar"};  // exact f32 activations
    default: return {};
  }
}

}  // namespace chimera::kernels
