// Internal to the IQ4_XS matmul kernels (matmul_iq4xs_{scalar,avx2,avx512}.cpp;
// the AVX2 kernel repacks rows in groups of 16 into the x16 layout,
// matmul_kquant_x16.h / matmul_iq4xs_x16_avx2.cpp, same bits):
// IQ4_XS weights (quant/iq4xs_blocks.h) x Q8_K activations (ggml block_q8_K
// layout, quantize_row_q8_K; the same packing on every ISA).
//
// Accumulation — that of llama.cpp's AVX2 ggml_vec_dot_iq4_xs_q8_K, identical
// bits on every ISA here. Per output 8 f32 lanes; lane l of super-block b gets
// the exact int32
//   S_l = sum over sub-blocks j, elements e of j with (e mod 32) / 4 == l, of
//         (ls_j - 32) * kIq4nlValues[q_e] * a_e
// (|S_l| <= 8*4*32*127*127 < 2^24, so f32(S_l) is exact), then
//   acc_l = fma(f16_to_f32(d_w) * d_a, f32(S_l), acc_l)
// and y = ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7)).
// Tolerance vs the f64 dot of the dequantized weights and dequantized Q8_K
// activations: (k/256 + 8) * 2^-23 * sum_e |w_e| * |a_e| (tested in
// tests/kernels/quant_iq4xs_test.cpp).
#pragma once

#include <cstdint>

#include "kernels/type_traits.h"
#include "quant/iq4xs_blocks.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels::iq4xs {

// Activations: ggml block_q8_K rows, packed by the K-quant packers
// (matmul_kquant.h: kq_pack_act, kq_pack_act_avx2; kq_act_bytes).

// Final reduction of one output's 8 lanes (order above).
inline float finish8(const float* acc) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// Activation rows per L2 block (the weights are walked once per block).
inline int64_t act_block_rows(size_t a_stride, int tile) {
  int64_t n = (int64_t)(256 * 1024 / (a_stride ? a_stride : 1)) / tile * tile;
  return n < tile ? tile : n;
}

// Per-ISA providers (empty kernel for other types / other architectures).
MatmulKernel kernel_scalar(format::GgmlType type);
MatmulKernel kernel_avx2(format::GgmlType type);
MatmulKernel kernel_avx512(format::GgmlType type);
MatmulKernel kernel_avx512vnni(format::GgmlType type);

}  // namespace chimera::kernels::iq4xs
