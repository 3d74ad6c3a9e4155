// Portable K-quant matmul kernels (Isa::kScalar) and the pieces every ISA
// shares: the scalar super-block decoders (storage block -> KqDecoded, see
// matmul_kquant.h for the decoded form), the Q8_K activation packer (ggml
// block_q8_K layout, quantized exactly as llama.cpp's x86 build does), and
// the per-type table. The scalar tile computes one output at a time with the
// accumulation structure documented in matmul_kquant.h (llama.cpp's AVX2
// vec_dot: exact int32 sums in 8 lanes per super-block, fma into 8 f32 lanes,
// fixed final reduction), which the SIMD kernels reproduce bit for bit — so
// every ISA returns identical results for K-quant weights.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels/matmul_kquant.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;
namespace q = chimera::quant;

// ---------------------------------------------------------------- decoders

void decode_q2_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  q::block_q2_K b;
  std::memcpy(&b, blk, sizeof(b));
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) out->q[128 * h + 32 * j + l] = (uint8_t)((b.qs[32 * h + l] >> (2 * j)) & 3);
    }
  }
  for (int g = 0; g < 16; ++g) {
    out->sc[g] = (int16_t)(b.scales[g] & 0xF);
    out->bc[g] = (int16_t)(b.scales[g] >> 4);
  }
  dd[0] = f16_to_f32(b.d);
  dd[1] = f16_to_f32(b.dmin);
}

void decode_q3_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  q::block_q3_K b;
  std::memcpy(&b, blk, sizeof(b));
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      const int bit = 4 * h + j;
      for (int l = 0; l < 32; ++l) {
        const int lo = (b.qs[32 * h + l] >> (2 * j)) & 3;
        const int hi = (b.hmask[l] >> bit) & 1;
        out->q[128 * h + 32 * j + l] = (uint8_t)(lo | (hi << 2));
      }
    }
  }
  for (int g = 0; g < 16; ++g) {
    const int s = q::q3_K_scale(b.scales, g);
    out->sc[g] = (int16_t)s;
    out->bc[g] = (int16_t)(-4 * s);
  }
  dd[0] = f16_to_f32(b.d);
  dd[1] = 0.f;
}

template <class Block>
void decode_k4_scales(const Block& b, KqDecoded* out, float* dd) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    q::get_scale_min_k4(j, b.scales, &sc, &m);
    out->sc[2 * j] = out->sc[2 * j + 1] = sc;
    out->bc[2 * j] = out->bc[2 * j + 1] = m;
  }
  dd[0] = f16_to_f32(b.d);
  dd[1] = f16_to_f32(b.dmin);
}

void decode_q4_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  q::block_q4_K b;
  std::memcpy(&b, blk, sizeof(b));
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      out->q[64 * j + l] = b.qs[32 * j + l] & 0xF;
      out->q[64 * j + 32 + l] = b.qs[32 * j + l] >> 4;
    }
  }
  decode_k4_scales(b, out, dd);
}

void decode_q5_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  q::block_q5_K b;
  std::memcpy(&b, blk, sizeof(b));
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      out->q[64 * j + l] = (uint8_t)((b.qs[32 * j + l] & 0xF) | (((b.qh[l] >> (2 * j)) & 1) << 4));
      out->q[64 * j + 32 + l] = (uint8_t)((b.qs[32 * j + l] >> 4) | (((b.qh[l] >> (2 * j + 1)) & 1) << 4));
    }
  }
  decode_k4_scales(b, out, dd);
}

void decode_q6_K(const uint8_t* blk, KqDecoded* out, float* dd) {
  q::block_q6_K b;
  std::memcpy(&b, blk, sizeof(b));
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    uint8_t* o = out->q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      o[l] = (uint8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
      o[l + 32] = (uint8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      o[l + 64] = (uint8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      o[l + 96] = (uint8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
  for (int g = 0; g < 16; ++g) {
    out->sc[g] = b.scales[g];
    out->bc[g] = (int16_t)(-32 * b.scales[g]);
  }
  dd[0] = f16_to_f32(b.d);
  dd[1] = 0.f;
}

const KqTypeInfo kInfoQ2K{sizeof(q::block_q2_K), KqMin::kLanes8, 0, decode_q2_K};
const KqTypeInfo kInfoQ3K{sizeof(q::block_q3_K), KqMin::kNone, 4, decode_q3_K};
const KqTypeInfo kInfoQ4K{sizeof(q::block_q4_K), KqMin::kLanes4, 0, decode_q4_K};
const KqTypeInfo kInfoQ5K{sizeof(q::block_q5_K), KqMin::kSum, 0, decode_q5_K};
const KqTypeInfo kInfoQ6K{sizeof(q::block_q6_K), KqMin::kNone, 32, decode_q6_K};

// ---------------------------------------------------------------- scalar tile

void tile_scalar(const KqDecoded* dec, const float* dd, int64_t nsb, const KqTypeInfo& t, const GemmArgs& g,
                 int64_t r, int64_t i) {
  const uint8_t* a = g.a + (size_t)i * g.a_stride;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, accm[4] = {0, 0, 0, 0}, summs = 0.f;
  for (int64_t sb = 0; sb < nsb; ++sb) {
    q::block_q8_K y;
    std::memcpy(&y, a + (size_t)sb * sizeof(q::block_q8_K), sizeof(y));
    const KqDecoded& w = dec[sb];
    int32_t S[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int e = 0; e < 256; ++e) S[(e % 32) / 4] += w.sc[e / 16] * ((int32_t)w.q[e] - t.offset) * y.qs[e];
    if (t.min != KqMin::kNone) {
      int32_t B[8];
      for (int l = 0; l < 8; ++l) B[l] = w.bc[2 * l] * y.bsums[2 * l] + w.bc[2 * l + 1] * y.bsums[2 * l + 1];
      const float dm = -y.d * dd[2 * sb + 1];
      if (t.min == KqMin::kLanes8) {
        for (int l = 0; l < 8; ++l) acc[l] = std::fma(dm, (float)B[l], acc[l]);
      } else if (t.min == KqMin::kLanes4) {
        for (int k = 0; k < 4; ++k) accm[k] = std::fma(dm, (float)(B[2 * k] + B[2 * k + 1]), accm[k]);
      } else {
        int32_t m = 0;
        for (int l = 0; l < 8; ++l) m += B[l];
        summs = std::fma(dm, (float)m, summs);
      }
    }
    const float d = y.d * dd[2 * sb];
    for (int l = 0; l < 8; ++l) acc[l] = std::fma(d, (float)S[l], acc[l]);
  }
  g.y[i * g.ldy + r] = detail::kq_finish(acc, accm, summs, t.min);
}

constexpr detail::KqTiles<1, 1> kScalarTiles = {{{tile_scalar}}, {0, 1}};

template <GgmlType T>
void gemm_scalar(const GemmArgs& g, int64_t r0, int64_t r1, int64_t i0, int64_t i1) {
  const KqTypeInfo* t = kq_type_info(T);
  detail::kq_gemm(kScalarTiles, *t, t->decode, g, r0, r1, i0, i1);
}

}  // namespace

const KqTypeInfo* kq_type_info(format::GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K: return &kInfoQ2K;
    case GgmlType::Q3_K: return &kInfoQ3K;
    case GgmlType::Q4_K: return &kInfoQ4K;
    case GgmlType::Q5_K: return &kInfoQ5K;
    case GgmlType::Q6_K: return &kInfoQ6K;
    default: return nullptr;
  }
}

size_t kq_act_bytes(int64_t k) { return (size_t)(k / quant::kQK_K) * sizeof(quant::block_q8_K); }

void kq_pack_act(const float* x, int64_t k, void* out) {
  quant::quantize_row_q8_K(x, static_cast<quant::block_q8_K*>(out), k);
}

MatmulKernel kquant_kernel_scalar(format::GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K: return {kq_pack_act, kq_act_bytes, gemm_scalar<GgmlType::Q2_K>, "gemm_q2_K_q8_K_scalar", GgmlType::Q8_K};
    case GgmlType::Q3_K: return {kq_pack_act, kq_act_bytes, gemm_scalar<GgmlType::Q3_K>, "gemm_q3_K_q8_K_scalar", GgmlType::Q8_K};
    case GgmlType::Q4_K: return {kq_pack_act, kq_act_bytes, gemm_scalar<GgmlType::Q4_K>, "gemm_q4_K_q8_K_scalar", GgmlType::Q8_K};
    case GgmlType::Q5_K: return {kq_pack_act, kq_act_bytes, gemm_scalar<GgmlType::Q5_K>, "gemm_q5_K_q8_K_scalar", GgmlType::Q8_K};
    case GgmlType::Q6_K: return {kq_pack_act, kq_act_bytes, gemm_scalar<GgmlType::Q6_K>, "gemm_q6_K_q8_K_scalar", GgmlType::Q8_K};
    default: return {};
  }
}

}  // namespace chimera::kernels
