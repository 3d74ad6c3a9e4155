// Matrix multiplication against weight tensors stored in GGUF types.
//
//   y[i][r] = sum_k W[r][k] * x[i][k]      i in [0, m), r in [0, W.rows)
//
// W is row-major in its storage type (ggml ne0 = cols = k). Following llama.cpp,
// each weight type has an activation ("vec_dot") type: activations are first
// converted row by row into it (F32 -> F32, F16 -> F16; the quantized types
// use Q8_0 / Q8_1 / Q8_K), then each output is a dot product of a weight row
// and an activation row accumulated in F32. Converting activations the same
// way llama.cpp does is what lets our logits match llama.cpp's within the
// golden tolerances. One deliberate difference: BF16 weights take exact f32
// activations (llama.cpp rounds them to BF16, which moves logits of BF16
// checkpoints well beyond the tolerance from the original model's fp32
// computation); see type_traits.cpp.
//
// Threads split the output rows r into contiguous ranges; every y element is
// computed by exactly one thread with a fixed summation order, so results are
// identical for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "core/thread_pool.h"
#include "format/gguf/ggml_types.h"

namespace chimera::kernels {

struct WeightView {
  format::GgmlType type = format::GgmlType::F32;
  const void* data = nullptr;
  int64_t rows = 0;      // output features (ggml ne1)
  int64_t cols = 0;      // input features (ggml ne0)
  size_t row_bytes = 0;  // bytes per row in storage

  // Load-time repacked copy of the rows (kernels/repack.h), or null. Used only
  // while `packed_kernel` is the kernel matmul picks (a test that lowers the
  // ISA after loading gets the storage-layout path). Owned by a PackedWeights.
  const void* packed = nullptr;
  const struct MatmulKernel* packed_kernel = nullptr;
  size_t packed_row_bytes = 0;  // packed bytes per row (averaged over a group)

  // Rows [r0, r0 + n) as a view of their own (expert slices of a 3-D tensor).
  // Keeps the packed copy when r0 falls on a packing group boundary.
  WeightView rows_slice(int64_t r0, int64_t n) const;
};


// True when matmul/row_to_f32 support weights of this type.
bool matmul_supports(format::GgmlType type);
Status check_matmul_type(format::GgmlType type);
// check_matmul_type plus the row length the kernels need (I2_S stores blocks
// of 128 but its kernels take 256-element Q8_K activation blocks).
Status check_matmul_shape(format::GgmlType type, int64_t cols);

// y = x · Wᵀ for m activation rows. x rows have stride ldx floats, y rows ldy.
// pool may be null (single-threaded).
void matmul(const WeightView& w, const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy,
            ThreadPool* pool);

// Converts/dequantizes row r of W into n = W.cols floats (embedding lookup).
void weight_row_to_f32(const WeightView& w, int64_t r, float* out);

}  // namespace chimera::kernels
