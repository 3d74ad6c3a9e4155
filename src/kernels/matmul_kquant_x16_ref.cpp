// Scalar reference of the x16 kernels' arithmetic (matmul_kquant_x16.h):
// Q4_K / Q5_K exact integer sums per super-block, one f32 update of each
// accumulator per super-block (Q6_K likewise, its level offset from the
// activations' bsums); Q2_K / Q3_K / IQ4_XS the
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

// Q6_K: the x16 order (matmul_kquant_x16.h): per super-block the exact int32
//   S = sum_g sc_g * (sum_{e in group g} q_e * a_e) - 32 * sum_g sc_g * bsum_g
// over the 16 groups g of 16 elements (q_e the 6-bit level 0..63, sc_g the
// int8 scale, bsum_g the activation block's bsums; |S| < 2^29), then
// acc = fma(dy * d, (float)S, acc); y = acc.
float dot_q6(const uint8_t* w_row, const uint8_t* a_row, int64_t k) {
  float acc = 0.f;
  for (int64_t sb = 0; sb < k / q::kQK_K; ++sb) {
    KqDecoded dec;
    float dd[2];
    kq_type_info(format::GgmlType::Q6_K)->decode(w_row + (size_t)sb * sizeof(q::block_q6_K), &dec, dd);
    q::block_q8_K a;
    std::memcpy(&a, a_row + (size_t)sb * sizeof(a), sizeof(a));
    int32_t S = 0, B = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t P = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e) P += dec.q[e] * a.qs[e];
      S += dec.sc[g] * P;
      B += dec.sc[g] * a.bsums[g];
    }
    S -= 32 * B;
    acc = std::fma(a.d * dd[0], (float)S, acc);
  }
  return acc;
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
