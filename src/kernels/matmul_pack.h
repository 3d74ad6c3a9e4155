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

// "f32 + f16" layout (F16 weights, AVX-512): the as_f32 row, padded to 64
// bytes, then the same values once more as f16. GEMM tiles read the f32 copy
// (no conversion in the inner loop); the GEMV tile reads the f16 copy, half
// the L1 traffic per weight byte, which is what lets a single weight stream
// per thread keep up with DRAM. Both copies hold the same values, so results
// do not depend on which one a tile read.
inline size_t act_f16_copy_offset(int64_t k) { return ((size_t)k * sizeof(float) + 63) / 64 * 64; }
inline size_t act_bytes_f32_f16(int64_t k) { return act_f16_copy_offset(k) + (size_t)k * sizeof(uint16_t); }

inline void pack_f16_as_f32_scalar(const float* x, int64_t k, void* out) {
  auto* o = static_cast<float*>(out);
  for (int64_t j = 0; j < k; ++j) o[j] = f16_to_f32(f32_to_f16(x[j]));
}

}  // namespace chimera::kernels
