// Legacy block-quant matmul, portable part: the activation packer every ISA
// uses (layout in matmul_q_legacy.h) and the Isa::kScalar kernels for Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1 and IQ4_NL weights.
//
// Activations are quantized to 32-element Q8 blocks exactly as llama.cpp's
// AVX2 build does (quant::quantize_block_q8_avx2_semantics). The scalar dot
// follows ggml's generic vec_dot per block: an exact int32 sum
// sumi = sum_j w_j a_j over the block's signed codes, then one f32 update
//   Q4_0:          sumf += sumi * d_w * d_a
//   Q8_0/Q5_0/IQ4: sumf += sumi * (d_w * d_a)
//   Q4_1/Q5_1:     sumf += (d_w * d_a) * sumi + m_w * s_a
// blocks in order. Tolerance against the exact double dot of the dequantized
// weights and dequantized activations (with the f16 s_a for _1 types):
// (nb + 4) * 2^-24 * sum_b |d_w d_a sumi_b| (+ |m_w s_a| terms), nb = k/32.
#include <cstring>

#include "core/fp16.h"
#include "kernels/matmul_q4_0_repack.h"
#include "kernels/matmul_q8_0_repack.h"
#include "kernels/matmul_q_legacy.h"
#include "quant/legacy_blocks.h"

namespace chimera::kernels::legacy {
namespace {

using format::GgmlType;

template <GgmlType T>
void pack_act(const float* x, int64_t k, void* out) {
  constexpr LegacyInfo info = legacy_info(T);
  uint8_t* base = static_cast<uint8_t*>(out);
  const int64_t nb = k / 32;
  int8_t* qs = reinterpret_cast<int8_t*>(base);
  float* dexp = reinterpret_cast<float*>(base + k);
  int32_t* bias = reinterpret_cast<int32_t*>(base + k + 32 * nb);
  float* sexp = reinterpret_cast<float*>(base + k + 64 * nb);
  for (int64_t b = 0; b < nb; ++b) {
    int8_t* q = qs + 32 * b;
    const float d = quant::quantize_block_q8_avx2_semantics(x + 32 * b, q);
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += q[j];
    const float dh = f16_to_f32(f32_to_f16(d));
    const float s = info.has_min ? f16_to_f32(f32_to_f16(d * (float)sum)) : 0.f;
    for (int l = 0; l < 8; ++l) {
      dexp[8 * b + l] = dh;
      bias[8 * b + l] = -info.bias * (q[4 * l] + q[4 * l + 1] + q[4 * l + 2] + q[4 * l + 3]);
      sexp[8 * b + l] = l == 0 ? s : 0.f;
    }
    const int32_t total = -info.bias * sum;
    std::memcpy(sexp + 8 * b + 1, &total, 4);
  }
}

inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Signed weight codes of one block, element order.
template <GgmlType T>
void decode_block(const uint8_t* blk, int w[32]) {
  constexpr LegacyInfo info = legacy_info(T);
  const uint8_t* qs = blk + info.off_qs;
  if constexpr (T == GgmlType::Q8_0) {
    for (int j = 0; j < 32; ++j) w[j] = (int8_t)qs[j];
  } else {
    uint32_t qh = 0;
    if constexpr (info.off_qh >= 0) std::memcpy(&qh, blk + info.off_qh, 4);
    for (int j = 0; j < 16; ++j) {
      int lo = qs[j] & 0x0F, hi = qs[j] >> 4;
      if constexpr (T == GgmlType::IQ4_NL) {
        w[j] = quant::kIq4nlValues[lo];
        w[j + 16] = quant::kIq4nlValues[hi];
        continue;
      }
      lo |= (int)((qh >> j) & 1u) << 4;
      hi |= (int)((qh >> (j + 16)) & 1u) << 4;
      constexpr int off = info.has_min ? 0 : info.bias;
      w[j] = lo - off;
      w[j + 16] = hi - off;
    }
  }
}

template <GgmlType T>
float dot_row(const uint8_t* wrow, const ActView& a, int64_t nb) {
  constexpr LegacyInfo info = legacy_info(T);
  float sumf = 0.f;
  int w[32];
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = wrow + b * info.bytes;
    decode_block<T>(blk, w);
    const int8_t* q = a.qs + 32 * b;
    int sumi = 0;
    for (int j = 0; j < 32; ++j) sumi += w[j] * q[j];
    const float dw = load_f16(blk), da = a.dexp[8 * b];
    if constexpr (info.has_min) {
      sumf += (dw * da) * (float)sumi + load_f16(blk + info.off_m) * a.sexp[8 * b];
    } else if constexpr (T == GgmlType::Q4_0) {
      sumf += (float)sumi * dw * da;
    } else {
      sumf += (float)sumi * (dw * da);
    }
  }
  return sumf;
}

template <GgmlType T>
void gemm(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const int64_t nb = g.k / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* w = g.w + (size_t)r * g.w_stride;
    for (int64_t i = i0; i < i1; ++i) {
      g.y[i * g.ldy + r] = dot_row<T>(w, act_view(g.a + (size_t)i * g.a_stride, g.k), nb);
    }
  }
}

template <GgmlType T>
MatmulKernel make(const char* name) {
  constexpr GgmlType vd = legacy_info(T).has_min ? GgmlType::Q8_1 : GgmlType::Q8_0;
  return {pack_act<T>, act_bytes_legacy, gemm<T>, name, vd};
}

}  // namespace

PackActFn legacy_pack_fn(format::GgmlType t) {
  return legacy_pick_packer(t, []<GgmlType T>() -> PackActFn { return pack_act<T>; });
}

MatmulKernel legacy_quant_kernel_scalar(format::GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: {
      MatmulKernel k = make<GgmlType::Q8_0>("gemm_q8_0_q8_0_scalar");
      q8r::add_repacking(k, q8r::gemm_packed_scalar);  // reference of the packed layout
      return k;
    }
    case GgmlType::Q4_0: {
      MatmulKernel k = make<GgmlType::Q4_0>("gemm_q4_0_q8_0_scalar");
      q4r::add_repacking(k, q4r::gemm_packed_scalar);  // reference of the packed layout
      return k;
    }
    case GgmlType::Q4_1: return make<GgmlType::Q4_1>("gemm_q4_1_q8_1_scalar");
    case GgmlType::Q5_0: return make<GgmlType::Q5_0>("gemm_q5_0_q8_0_scalar");
    case GgmlType::Q5_1: return make<GgmlType::Q5_1>("gemm_q5_1_q8_1_scalar");
    case GgmlType::IQ4_NL: return make<GgmlType::IQ4_NL>("gemm_iq4_nl_q8_0_scalar");
    default: return {};
  }
}

}  // namespace chimera::kernels::legacy
