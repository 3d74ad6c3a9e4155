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

  // Load-time repacked copy of rows [0, packed_rows) (kernels/repack.h), or
  // null. packed_rows is a multiple of the kernel's group; the rows after it
  // (fewer than a group: a 50280-row output head packs 50272) are read from
  // `data` by the storage-layout kernel. Used only while `packed_kernel` is
  // the kernel matmul picks (a test that lowers the ISA after loading gets the
  // storage-layout path). Owned by a PackedWeights.
  const void* packed = nullptr;
  const struct MatmulKernel* packed_kernel = nullptr;
  size_t packed_row_bytes = 0;  // packed bytes per row (averaged over a group)
  int64_t packed_rows = 0;

  // Rows [r0, r0 + n) as a view of their own (expert slices of a 3-D tensor).
  // Keeps the packed copy for the whole groups of the slice inside
  // [0, packed_rows) when r0 falls on a packing group boundary.
  WeightView rows_slice(int64_t r0, int64_t n) const;
};


// True when matmul/row_to_f32 support weights of this type.
bool matmul_supports(format::GgmlType type);
Status check_matmul_type(format::GgmlType type);
// check_matmul_type plus the row length the kernels need (I2_S stores blocks
// of 128 but its kernels take 256-element Q8_K activation blocks).
Status check_matmul_shape(format::GgmlType type, int64_t cols);

// y = x · Wᵀ for m activation rows. x rows have stride ldx floats, y rows ldy.
// pool may be null (single-threaded). A group of one task (grouped_matmul):
// there is one matmul driver.
void matmul(const WeightView& w, const float* x, int64_t m, int64_t ldx, float* y, int64_t ldy,
            ThreadPool* pool);

// Grouped matmul: several independent products y = x · Wᵀ (q/k/v, gate/up,
// the experts of a MoE step) run as ONE parallel job over the concatenation
// of their output rows instead of one pool job each. In decode every product
// is a GEMV of a few hundred to a few thousand rows; issuing them separately
// costs a pool wake-up and a barrier each, and a 448-row GEMV split over 2
// threads leaves little work per thread. One job over all rows keeps every
// thread busy until the phase ends.
//
// Activation packing (quantization for the integer kernels) is row-wise; each
// task's rows are packed once (a task whose x, m, ldx, cols and kernel equal
// the previous task's reuses its packing), over the pool as well when there is
// enough of it. Work is partitioned by cost (rows × activation rows m), so
// tasks with different m share the threads fairly, in contiguous ranges whose
// bounds are rounded to the 16-row grain the kernels tile by. Each y element
// is computed by exactly one kernel call with the kernel's own fixed summation
// order, and kernels do not depend on the row bounds they are given, so the
// results are bit-identical to one task at a time, for any thread count.
struct GroupedMatmulTask {
  WeightView w;
  const float* x = nullptr;  // m activation rows, stride ldx floats
  int64_t m = 0;
  int64_t ldx = 0;
  float* y = nullptr;        // m output rows, stride ldy floats
  int64_t ldy = 0;
};

// Most tasks one grouped_matmul call takes.
constexpr int64_t kGroupedMatmulMaxTasks = 64;
// Below this many multiply-adds in all tasks together, the pool is not woken.
constexpr int64_t kGroupedMatmulMinParallelMacs = 1 << 18;

// Bytes of packing scratch grouped_matmul needs for these tasks.
size_t grouped_matmul_scratch_bytes(const GroupedMatmulTask* tasks, int64_t n);

// Runs all n <= kGroupedMatmulMaxTasks tasks. `scratch` must hold
// grouped_matmul_scratch_bytes() bytes, 64-byte aligned. pool may be null.
// Weight types must be supported by matmul. min_parallel_macs: tests pass 0
// to exercise the parallel split on small sizes.
void grouped_matmul(const GroupedMatmulTask* tasks, int64_t n, uint8_t* scratch, ThreadPool* pool,
                    int64_t min_parallel_macs = kGroupedMatmulMinParallelMacs);

// Converts/dequantizes row r of W into n = W.cols floats (embedding lookup).
void weight_row_to_f32(const WeightView& w, int64_t r, float* out);

}  // namespace chimera::kernels
