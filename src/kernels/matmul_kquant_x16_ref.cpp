// Scalar reference of the x16 kernels' arithmetic (matmul_kquant_x16.h):
// Q4_K / Q5_K exact integer sums per super-block, one f32 update of each
// accumulator per super-block; Q6_K llama.cpp's current AVX2 order (the level
// offset from the activations' bsums, per lane); Q2_K / Q3_K / IQ4_XS the
// storage kernels' order (the scalar storage kernel computes it). The x16
// kernels reproduce it bit for bit.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_kquant_x16.h"
#include "quant/kquant_blocks.h"

namespace chimera::kernels {
namespace {

namespace q = chimera::quant;

// Level of element 32j + e of a Q4_K / Q5_K super-block (ggml's dequantize order).
template <class Block>
int level(const Block& b, int j, int e) {
  const int c = j / 2, odd = j % 2;
  int v = (b.qs[32 * c + e] >> (4 * odd)) & 0xF;
  if constexpr (sizeof(Block) == sizeof(q::block_q5_K)) v |= ((b.qh[e] >> (2 * c + odd)) & 1) << 4;
  return v;
}

template <class Block>
float dot(const uint8_t* w_row, const uint8_t* a_row, int64_t k) {
  float acc = 0.f, accm = 0.f;
  for (int64_t sb = 0; sb < k / q::kQK_K; ++sb) {
    Block b;
    q::block_q8_K a;
    std::memcpy(&b, w_row + (size_t)sb * sizeof(b), sizeof(b));
    std::memcpy(&a, a_row + (size_t)sb * sizeof(a), sizeof(a));
    int32_t S = 0, Bm = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      q::get_scale_min_k4(j, b.scales, &sc, &m);
      int32_t P = 0;
      for (int e = 0; e < 32; ++e) P += level(b, j, e) * a.qs[32 * j + e];
      S += sc * P;
      Bm += m * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
    }
    acc = std::fma(a.d * f16_to_f32(b.d), (float)S, acc);
    accm = std::fma(-a.d * f16_to_f32(b.dmin), (float)Bm, accm);
  }
  return acc + accm;
}

// Q6_K: llama.cpp's AVX2 ggml_vec_dot_q6_K_q8_K (3f545bec): 8 f32 lanes, lane
// l of super-block b gets the exact int32
//   S_l = sum_{e : (e mod 32) / 4 == l} sc_{e/16} * q_e * a_e
//         - 32 * (sc_2l * bsum_2l + sc_2l+1 * bsum_2l+1)
// as acc_l = fma(dy * d, (float)S_l, acc_l); y = ((acc0+acc4) + (acc2+acc6)) +
// ((acc1+acc5) + (acc3+acc7)). (The sum over l is the storage kernels'
// sum_e sc * (q_e - 32) * a_e; only the split into lanes differs.)
float dot_q6(const uint8_t* w_row, const uint8_t* a_row, int64_t k) {
  float acc[8] = {};
  for (int64_t sb = 0; sb < k / q::kQK_K; ++sb) {
    KqDecoded dec;
    float dd[2];
    kq_type_info(format::GgmlType::Q6_K)->decode(w_row + (size_t)sb * sizeof(q::block_q6_K), &dec, dd);
    q::block_q8_K a;
    std::memcpy(&a, a_row + (size_t)sb * sizeof(a), sizeof(a));
    for (int l = 0; l < 8; ++l) {
      int32_t S = 0;
      for (int e0 = 4 * l; e0 < 256; e0 += 32) {
        for (int e = e0; e < e0 + 4; ++e) S += dec.sc[e / 16] * dec.q[e] * a.qs[e];
      }
      S -= 32 * (dec.sc[2 * l] * a.bsums[2 * l] + dec.sc[2 * l + 1] * a.bsums[2 * l + 1]);
      acc[l] = std::fma(a.d * dd[0], (float)S, acc[l]);
    }
  }
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

}  // namespace

float kq_x16_dot_ref(format::GgmlType type, const uint8_t* w_row, const uint8_t* a_row, int64_t k) {
  switch (type) {
    case format::GgmlType::Q4_K: return dot<q::block_q4_K>(w_row, a_row, k);
    case format::GgmlType::Q5_K: return dot<q::block_q5_K>(w_row, a_row, k);
    case format::GgmlType::Q6_K: return dot_q6(w_row, a_row, k);
    default: {  // Q2_K, Q3_K, IQ4_XS: one output of the scalar storage kernel
      float y = 0.f;
      GemmArgs g;
      g.w = w_row;
      g.w_stride = weight_type_traits(type)->type_size * (size_t)(k / q::kQK_K);
      g.a = a_row;
      g.a_stride = kq_act_bytes(k);
      g.k = k;
      g.y = &y;
      g.ldy = 1;
      matmul_kernel(type, Isa::kScalar)->gemm(g, 0, 1, 0, 1);
      return y;
    }
  }
}

}  // namespace chimera::kernels
