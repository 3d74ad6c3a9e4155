// Internal to the matmul kernels: activation packers shared by several ISAs.
// "as_f32" layouts hold the activation rounded (RNE) to the vec_dot type but
// widened back to f32 — exact, and it spares the inner loop a conversion.
// Every SIMD packer must produce bit-identical output to the scalar one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/fp16.h"

namespace chimera::kernels {

inline size_t act_bytes_f32(int64_t k) { return (size_t)k * sizeof(float); }
inline size_t act_bytes_16bit(int64_t k) { return (size_t)k * sizeof(uint16_t); }

inline void pack_f16_as_f32_scalar(const float* x, int64_t k, void* out) {
  auto* o = static_cast<float*>(out);
  for (int64_t j = 0; j < k; ++j) o[j] = f16_to_f32(f32_to_f16(x[j]));
}

inline void pack_bf16_as_f32_scalar(const float* x, int64_t k, void* out) {
  auto* o = static_cast<float*>(out);
  for (int64_t j = 0; j < k; ++j) o[j] = bf16_to_f32(f32_to_bf16(x[j]));
}

inline void pack_bf16_scalar(const float* x, int64_t k, void* out) {
  auto* o = static_cast<uint16_t*>(out);
  for (int64_t j = 0; j < k; ++j) o[j] = f32_to_bf16(x[j]);
}

}  // namespace chimera::kernels
