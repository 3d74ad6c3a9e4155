// Portable ternary matmul kernels (Isa::kScalar) for TQ1_0 / TQ2_0 / I2_S weights x
// Q8_K activations, plus the block decoders every ISA shares. The scalar dot
// follows the accumulation documented in matmul_ternary.h (llama.cpp's AVX2
// vec_dot: exact int32 lane sums per super-block with the Q8_K block sums
// subtracted per lane pair, fma into 8 f32 lanes, fixed final reduction); the
// SIMD kernels reproduce it bit for bit, so every ISA returns identical
// results. Activations use the K-quant packer (block_q8_K, llama.cpp-exact).
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/matmul_kquant.h"
#include "kernels/matmul_ternary.h"
#include "quant/i2s.h"

namespace chimera::kernels {

using format::GgmlType;
namespace q = chimera::quant;

float tq1_0_decode(const uint8_t* blk, TqDecoded* out) {
  q::block_tq1_0 b;
  std::memcpy(&b, blk, sizeof(b));
  q::tq1_0_trits(b, out->t);
  return f16_to_f32(b.d);
}

float tq2_0_decode(const uint8_t* blk, TqDecoded* out) {
  q::block_tq2_0 b;
  std::memcpy(&b, blk, sizeof(b));
  q::tq2_0_trits(b, out->t);
  return f16_to_f32(b.d);
}

float i2s_decode(const uint8_t* blk, TqDecoded* out) {
  for (int j = 0; j < 256; ++j) out->t[j] = (uint8_t)q::i2s_code(blk, j);
  return 0.f;
}

namespace {

float dot_scalar(const TqDecoded* w, const float* wd, const uint8_t* act, int64_t nsb) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t sb = 0; sb < nsb; ++sb) {
    q::block_q8_K y;
    std::memcpy(&y, act + (size_t)sb * sizeof(q::block_q8_K), sizeof(y));
    int32_t S[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < 256; ++e) S[(e % 32) / 4] += (int32_t)w[sb].t[e] * y.qs[e];
    for (int l = 0; l < 8; ++l) S[l] -= (int32_t)y.bsums[2 * l] + (int32_t)y.bsums[2 * l + 1];
    const float d = y.d * wd[sb];
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, (float)S[l], acc[l]);
  }
  return detail::tq_finish(acc);
}

}  // namespace

MatmulKernel ternary_kernel_scalar(format::GgmlType type) {
  switch (type) {
    case GgmlType::TQ1_0:
      return {kq_pack_act, kq_act_bytes, detail::tq_gemm<tq1_0_decode, sizeof(q::block_tq1_0), dot_scalar>,
              "gemm_tq1_0_q8_K_scalar", GgmlType::Q8_K};
    case GgmlType::TQ2_0:
      return {kq_pack_act, kq_act_bytes, detail::tq_gemm<tq2_0_decode, sizeof(q::block_tq2_0), dot_scalar>,
              "gemm_tq2_0_q8_K_scalar", GgmlType::Q8_K};
    case GgmlType::I2_S:
      return {kq_pack_act, kq_act_bytes, detail::i2s_gemm<dot_scalar>, "gemm_i2_s_q8_K_scalar", GgmlType::Q8_K};
    default: return {};
  }
}

}  // namespace chimera::kernels
