// Per-weight-type kernel table for matmul, in the spirit of llama.cpp's
// ggml type_traits: every weight type that matmul supports is one table entry,
// and the generic driver (matmul.cpp) never branches on the type. An entry says
//   - vec_dot_type: the type activations are rounded/quantized to before the
//     dot product (F32 -> F32, F16 -> F16, BF16 -> BF16; Q8_0/Q4_0 -> Q8_0,
//     K-quants -> Q8_K when those land),
//   - act_from_f32: f32 activation row -> vec_dot_type row in ggml storage
//     layout (the semantic conversion; the reference and tests use it),
//   - row_to_f32: weight row -> f32 (dequantization / embedding lookup),
//   - kernels[isa]: the optimised implementation for each ISA level.
// A kernel packs activation rows into its own layout (`pack_act`, possibly
// wider than the vec_dot type, e.g. F16-rounded values kept as f32 so the inner
// loop needs no conversion) and computes a [rows x activations] block of dot
// products (`gemm`). Invariant every kernel keeps: the value of y[i][r] depends
// only on (weight row r, activation row i, k) and the ISA — never on which
// tile, block or thread computed it — so GEMV (m == 1) and batched GEMM agree
// bit for bit, and so do different thread counts.
//
// Accumulation (F32/F16/BF16): f32, one SIMD-width accumulator per output
// (8 lanes scalar/AVX2, 16 lanes AVX-512; vdpbf16ps pairs on AVX512_BF16),
// element j into lane j % width, then a fixed-order horizontal sum. Products
// of F16xF16 and BF16xBF16 values are exact in f32. Tolerance against
// ref::matmul_ref: (ceil(k/8) + 8) * 2^-24 * sum_k |w| |round_vd(x)|.
// Results differ between ISAs (different lane counts), never within one.
//
// Adding a quantized type = one entry: block geometry, act_from_f32 =
// quantize_row_q8_0 (say), row_to_f32 = dequantize_row, and per-ISA kernels
// whose pack_act writes Q8 blocks and whose gemm consumes them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/thread_pool.h"
#include "format/gguf/ggml_types.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"

namespace chimera::kernels {

constexpr int kIsaCount = 7;  // Isa enum values 0..6

// One call's operands. Byte strides let the same signature serve block formats.
struct GemmArgs {
  const uint8_t* w = nullptr;  // weight row 0 in storage layout
  size_t w_stride = 0;         // bytes between weight rows
  const uint8_t* a = nullptr;  // packed activation row 0 (kernel layout)
  size_t a_stride = 0;         // bytes between packed activation rows
  int64_t k = 0;               // dot length (weight cols)
  float* y = nullptr;          // y[i * ldy + r]
  int64_t ldy = 0;
  // First byte after the last weight row of the tensor (per-tensor data some
  // types store there: I2_S's f32 scale). Set by matmul for every call.
  const uint8_t* w_tail = nullptr;
};

// Writes y[i][r] = dot(weight row r, activation row i) for r in [r0, r1) and
// i in [i0, i1). Must not allocate. Results must not depend on the bounds.
using GemmFn = void (*)(const GemmArgs& args, int64_t r0, int64_t r1, int64_t i0, int64_t i1);
// Packs one f32 activation row of k values into the kernel layout at `out`.
using PackActFn = void (*)(const float* x, int64_t k, void* out);
// Bytes one packed activation row of k values occupies (before alignment padding).
using ActBytesFn = size_t (*)(int64_t k);
// Converts n values of a row stored as `type` into f32 / from f32.
using RowToF32Fn = void (*)(const void* row, float* out, int64_t n);
using RowFromF32Fn = void (*)(const float* x, void* out, int64_t n);

struct MatmulKernel {
  // Null pack_act means the kernel reads f32 activations in place (stride ldx);
  // then act_bytes is unused.
  PackActFn pack_act = nullptr;
  ActBytesFn act_bytes = nullptr;
  GemmFn gemm = nullptr;
  const char* name = nullptr;  // e.g. "gemm_f16_f16_avx512" (benchmarks, logs)
  // Element layout pack_act writes: F32 (values already rounded to
  // vec_dot_type, widened back; exact) or vec_dot_type itself.
  format::GgmlType act_layout = format::GgmlType::F32;
  // The kernel whose packed weight layout this one reads, when it is another
  // one's (the AMX Q4_K kernel reads the AVX-512 VNNI x16 layout): repack
  // cache entries are named after it, so both levels share them. Null: `name`.
  const char* layout_name = nullptr;

  // Optional load-time weight repacking (kernels/repack.h). When `repack` is
  // set, a tensor whose row count is a multiple of repack_rows (a power of two
  // <= 16) may be converted once into this kernel's own layout. matmul then
  // calls gemm_packed (same pack_act / activation layout) with GemmArgs.w =
  // the packed copy and w_stride = repack_row_bytes(k): bytes per row averaged
  // over a group, so group g of repack_rows rows starts at
  // g * repack_rows * w_stride. gemm_packed is called with r0 a multiple of
  // repack_rows and r1 a multiple of it or the tensor's row count (itself a
  // multiple). It keeps the invariant above (y[i][r] independent of bounds,
  // m and thread count) and states its tolerance against the reference.
  int repack_rows = 0;
  size_t (*repack_row_bytes)(int64_t k) = nullptr;
  // Converts n rows (n % repack_rows == 0) stored in the type's GGUF layout,
  // row stride src_stride bytes, into the packed layout at dst
  // (n * repack_row_bytes(k) bytes).
  void (*repack)(const uint8_t* src, size_t src_stride, int64_t n, int64_t k, uint8_t* dst) = nullptr;
  GemmFn gemm_packed = nullptr;
};

struct WeightTypeTraits {
  format::GgmlType type = format::GgmlType::F32;
  format::GgmlType vec_dot_type = format::GgmlType::F32;
  int64_t block_size = 1;  // weight elements per storage block
  size_t type_size = 4;    // bytes per storage block
  RowFromF32Fn act_from_f32 = nullptr;  // f32 -> vec_dot_type (ggml layout, RNE)
  RowToF32Fn row_to_f32 = nullptr;      // weight storage -> f32 (exact for F16/BF16)
  // I2_S: row_to_f32 yields the codes' values (c - 1); the per-tensor f32
  // scale after the last row multiplies them (weight_row_to_f32 does this).
  bool tail_f32_scale = false;
  // Indexed by (int)Isa. An empty slot falls back to the next lower level
  // that has one (ending at kScalar, which every entry must fill).
  MatmulKernel kernels[kIsaCount];
};

// Bytes between packed activation rows of kernel k (act_bytes rounded up to
// 64-byte alignment).
size_t act_stride(const MatmulKernel* k, int64_t cols);

// Activation rows one product packs: x rows [0, m) (stride ldx floats) into
// out, `stride` bytes apart, with kern->pack_act.
struct ActPackJob {
  const MatmulKernel* kern;
  const float* x;
  int64_t m, ldx, cols;
  uint8_t* out;
  size_t stride;
};
// From this many activation values in all jobs, packing is split over the pool
// (8 rows of 4096, an 8-stream decode step's GEMM, were packed serially at
// 1 << 16 while the other threads waited: ~5 % of phimoe4's step).
constexpr int64_t kMinParallelPackValues = 1 << 14;
// Packs the rows of every job, flattened as one row range split over the pool
// when there are at least kMinParallelPackValues values (packing is
// row-independent: same bytes either way). pool may be null.
void pack_activations(const ActPackJob* jobs, int64_t n, ThreadPool* pool);

// Fills args.w / w_stride / k / w_tail for `w` and returns the gemm function of
// `kern` (the kernel matmul_kernel() picked for w.type): the packed one when w
// carries a copy packed for this kernel, else the storage-layout one.
GemmFn bind_weight(const WeightView& w, const MatmulKernel* kern, GemmArgs& args);

// The entry for `type`, or null when matmul does not support it.
const WeightTypeTraits* weight_type_traits(format::GgmlType type);

// The kernel matmul uses for `type` at `isa` (after fallback); null when
// the type is unsupported.
const MatmulKernel* matmul_kernel(format::GgmlType type, Isa isa);

// Per-ISA kernel providers (each defined in its own translation unit; the x86
// ones return an empty kernel on other architectures).
MatmulKernel matmul_kernel_scalar(format::GgmlType type);
MatmulKernel matmul_kernel_avx2(format::GgmlType type);
// AVX2 + AVX-VNNI: only the types with kernels of their own (the x16 Q4_K
// GEMM); the others fall back to the AVX2 ones.
MatmulKernel matmul_kernel_avx2vnni(format::GgmlType type);
MatmulKernel matmul_kernel_avx512(format::GgmlType type);
MatmulKernel matmul_kernel_avx512vnni(format::GgmlType type);
// AMX (tile int8): only the types with kernels of their own; the others fall
// back to the AVX-512 VNNI ones.
MatmulKernel matmul_kernel_amx(format::GgmlType type);

}  // namespace chimera::kernels
