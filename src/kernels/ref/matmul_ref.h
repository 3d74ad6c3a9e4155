// Scalar reference for matmul (the specification; never on the hot path).
//
//   y[i][r] = sum_k  f32(W[r][k]) * round_vd(x[i][k])
//
// f32(W) converts the storage type exactly (F16/BF16 widen exactly).
// round_vd rounds the activation to the weight type's vec_dot type, as
// llama.cpp does before its dot products: F32 -> unchanged, F16 -> nearest
// binary16 (RNE; |x| >= 65520 becomes ±inf), BF16 -> nearest bfloat16 (RNE).
// The products of those values are exact in double, and the sum is taken in
// double, so the reference carries no f32 rounding of its own. Optimised
// kernels accumulate in f32 in some fixed order; their error against this
// reference is bounded by (ceil(k / 8) + 8) * 2^-24 * sum_k |W[r][k]| |round_vd(x[i][k])|
// (see ref_abs_dot), which the tests enforce.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"

namespace chimera::kernels::ref {

// out[j] = round_vd(x[j]) for weights of `type` (F32, F16 or BF16).
void round_activation_ref(format::GgmlType type, const float* x, float* out, int64_t n);

// Row r of W converted to f32 (F32/F16/BF16).
void weight_row_to_f32_ref(const WeightView& w, int64_t r, float* out);

// y[i * ldy + r] (double) for i < m; abs_dot (nullable) gets sum |w| |round_vd(x)|
// at the same index, the scale of the tolerance.
void matmul_ref(const WeightView& w, const float* x, int64_t m, int64_t ldx, double* y, int64_t ldy,
                double* abs_dot);

}  // namespace chimera::kernels::ref
