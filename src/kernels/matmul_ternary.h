// Internal to the ternary matmul kernels (TQ1_0, TQ2_0 weights x Q8_K
// activations): the decoded block form every ISA shares and the row driver.
//
// Layout: each call decodes one weight row at a time (all super-blocks of k)
// into TqDecoded blocks — 256 trits t in {0,1,2} in natural element order
// plus the f32 block scale — in a thread-local panel, then dots that row with
// every activation row of the call (Q8_K blocks, packed by kq_pack_act), so a
// prefill decodes each weight once.
//
// Accumulation — exactly llama.cpp's AVX2 ggml_vec_dot_tq{1,2}_0_q8_K (the
// build the golden references come from), identical bits on every ISA here:
// per output 8 f32 lanes; lane l of super-block b gets the exact int32
//   S_l = sum over e with (e mod 32) / 4 == l of t_e * a_e  - bsums[2l] - bsums[2l+1]
// (the -1 offset of the trits folded in through the Q8_K block sums the way
// llama.cpp does it, which changes the per-lane values but not their sum), as
// acc_l = fma(dy * d, (float)S_l, acc_l) (llama.cpp writes mul + add, which
// GCC contracts to an FMA in its -march=native build), and
// y = ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7)).
// Tolerance vs the f64 dot of dequantized operands (w = d (t-1), a = dy q):
//   (k/256 + 8) * 2^-23 * sum_e |w_e| |a_e| + same with |w| -> |d|.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/type_traits.h"
#include "quant/kquant_blocks.h"
#include "quant/ternary_blocks.h"

namespace chimera::kernels {

struct alignas(64) TqDecoded {
  uint8_t t[256];
};

// Decodes one storage block into 256 trits and returns its f32 scale.
using TqDecodeFn = float (*)(const uint8_t* blk, TqDecoded* out);
// Dot of one decoded weight row (nsb blocks, scales wd) with one Q8_K row.
using TqDotFn = float (*)(const TqDecoded* w, const float* wd, const uint8_t* act, int64_t nsb);

float tq1_0_decode(const uint8_t* blk, TqDecoded* out);
float tq2_0_decode(const uint8_t* blk, TqDecoded* out);

// Per-ISA providers (empty kernel for non-ternary types / other architectures).
MatmulKernel ternary_kernel_scalar(format::GgmlType type);
MatmulKernel ternary_kernel_avx2(format::GgmlType type);
MatmulKernel ternary_kernel_avx512(format::GgmlType type);
MatmulKernel ternary_kernel_avx512vnni(format::GgmlType type);

namespace detail {

// Final reduction of one output's 8 lanes (fixed order, see above).
inline float tq_finish(const float* acc) {
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// Row driver shared by every ISA; results do not depend on [r0,r1) x [i0,i1).
template <TqDecodeFn Decode, size_t kBlockBytes, TqDotFn Dot>
void tq_gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nsb = g.k / quant::kQK_K;
  thread_local std::vector<TqDecoded> dec;
  thread_local std::vector<float> dd;
  if ((int64_t)dec.size() < nsb) {
    dec.resize((size_t)nsb);
    dd.resize((size_t)nsb);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t sb = 0; sb < nsb; ++sb) dd[(size_t)sb] = Decode(w + (size_t)sb * kBlockBytes, &dec[(size_t)sb]);
    for (int64_t i = i0; i < i1; ++i) g.y[i * g.ldy + r] = Dot(dec.data(), dd.data(), g.a + (size_t)i * g.a_stride, nsb);
  }
}

}  // namespace detail
}  // namespace chimera::kernels
