// The weight-type table: one entry per supported weight type, assembled once
// from the canonical scalar conversions (fp16.h) and the per-ISA kernel
// providers. Lookups after the first are a table read; there is no per-call
// branching on the type anywhere else in matmul.
#include "kernels/type_traits.h"

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "quant/kquant_blocks.h"
#include "kernels/matmul_iq4xs.h"
#include "quant/i2s.h"
#include "quant/iq4xs_blocks.h"
#include "quant/legacy_blocks.h"
#include "quant/ternary_blocks.h"

namespace chimera::kernels {
namespace {

using format::GgmlType;

void f32_from_f32(const float* x, void* out, int64_t n) { std::memcpy(out, x, (size_t)n * sizeof(float)); }
void f32_to_f32(const void* row, float* out, int64_t n) { std::memcpy(out, row, (size_t)n * sizeof(float)); }

void f16_from_f32(const float* x, void* out, int64_t n) {
  auto* o = static_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = f32_to_f16(x[i]);
}
void f16_to_f32_row(const void* row, float* out, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(row);
  for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(h[i]);
}

void bf16_to_f32_row(const void* row, float* out, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(row);
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(h[i]);
}

WeightTypeTraits make_entry(GgmlType type, GgmlType vec_dot, int64_t block, size_t size, RowFromF32Fn from,
                            RowToF32Fn to) {
  WeightTypeTraits t;
  t.type = type;
  t.vec_dot_type = vec_dot;
  t.block_size = block;
  t.type_size = size;
  t.act_from_f32 = from;
  t.row_to_f32 = to;
  t.kernels[(int)Isa::kScalar] = matmul_kernel_scalar(type);
  t.kernels[(int)Isa::kAvx2] = matmul_kernel_avx2(type);
  t.kernels[(int)Isa::kAvx2Vnni] = matmul_kernel_avx2vnni(type);
  t.kernels[(int)Isa::kAvx512] = matmul_kernel_avx512(type);
  t.kernels[(int)Isa::kAvx512Vnni] = matmul_kernel_avx512vnni(type);
  t.kernels[(int)Isa::kAmx] = matmul_kernel_amx(type);
  return t;
}

// I2_S codes -> (c - 1); the tensor scale is applied by weight_row_to_f32.
void i2s_codes_to_f32(const void* row, float* out, int64_t n) {
  quant::dequantize_row_i2s(static_cast<const uint8_t*>(row), 1.0f, out, n);
}

// Legacy block types (quant/legacy_blocks.h): typed conversions adapted to the
// table's untyped signatures.
template <class Block, void (*Fn)(const float*, Block*, int64_t)>
void quant_from_f32(const float* x, void* out, int64_t n) {
  Fn(x, static_cast<Block*>(out), n);
}
template <class Block, void (*Fn)(const Block*, float*, int64_t)>
void quant_to_f32(const void* row, float* out, int64_t n) {
  Fn(static_cast<const Block*>(row), out, n);
}

struct Table {
  std::vector<WeightTypeTraits> entries;
  Table() {
    entries.push_back(make_entry(GgmlType::F32, GgmlType::F32, 1, 4, f32_from_f32, f32_to_f32));
    entries.push_back(make_entry(GgmlType::F16, GgmlType::F16, 1, 2, f16_from_f32, f16_to_f32_row));
    // BF16 weights multiply exact f32 activations (bf16 -> f32 is a shift, so
    // this costs nothing), unlike llama.cpp, which rounds activations to BF16:
    // that moves a BF16 checkpoint's logits by ~2.5% of their scale from the
    // fp32 computation on the same weights (phi4flash-a, Granite).
    entries.push_back(make_entry(GgmlType::BF16, GgmlType::F32, 1, 2, f32_from_f32, bf16_to_f32_row));
    add_legacy_quant_entries();
    add_kquant_entries();
  }
  void add_legacy_quant_entries() {
    using namespace quant;
    const auto q8_0 = quant_from_f32<block_q8_0, quantize_row_q8_0>;
    const auto q8_1 = quant_from_f32<block_q8_1, quantize_row_q8_1>;
    entries.push_back(make_entry(GgmlType::Q8_0, GgmlType::Q8_0, 32, sizeof(block_q8_0), q8_0,
                                 quant_to_f32<block_q8_0, dequantize_row_q8_0>));
    entries.push_back(make_entry(GgmlType::Q4_0, GgmlType::Q8_0, 32, sizeof(block_q4_0), q8_0,
                                 quant_to_f32<block_q4_0, dequantize_row_q4_0>));
    entries.push_back(make_entry(GgmlType::Q4_1, GgmlType::Q8_1, 32, sizeof(block_q4_1), q8_1,
                                 quant_to_f32<block_q4_1, dequantize_row_q4_1>));
    entries.push_back(make_entry(GgmlType::Q5_0, GgmlType::Q8_0, 32, sizeof(block_q5_0), q8_0,
                                 quant_to_f32<block_q5_0, dequantize_row_q5_0>));
    entries.push_back(make_entry(GgmlType::Q5_1, GgmlType::Q8_1, 32, sizeof(block_q5_1), q8_1,
                                 quant_to_f32<block_q5_1, dequantize_row_q5_1>));
    entries.push_back(make_entry(GgmlType::IQ4_NL, GgmlType::Q8_0, 32, sizeof(block_iq4_nl), q8_0,
                                 quant_to_f32<block_iq4_nl, dequantize_row_iq4_nl>));
  }
  // K-quant super-block types (quant/kquant_blocks.h), Q8_K activations.
  void add_kquant_entries() {
    using namespace quant;
    const auto q8_K = quant_from_f32<block_q8_K, quantize_row_q8_K>;
    entries.push_back(make_entry(GgmlType::Q2_K, GgmlType::Q8_K, 256, sizeof(block_q2_K), q8_K,
                                 quant_to_f32<block_q2_K, dequantize_row_q2_K>));
    entries.push_back(make_entry(GgmlType::Q3_K, GgmlType::Q8_K, 256, sizeof(block_q3_K), q8_K,
                                 quant_to_f32<block_q3_K, dequantize_row_q3_K>));
    entries.push_back(make_entry(GgmlType::Q4_K, GgmlType::Q8_K, 256, sizeof(block_q4_K), q8_K,
                                 quant_to_f32<block_q4_K, dequantize_row_q4_K>));
    entries.push_back(make_entry(GgmlType::Q5_K, GgmlType::Q8_K, 256, sizeof(block_q5_K), q8_K,
                                 quant_to_f32<block_q5_K, dequantize_row_q5_K>));
    entries.push_back(make_entry(GgmlType::Q6_K, GgmlType::Q8_K, 256, sizeof(block_q6_K), q8_K,
                                 quant_to_f32<block_q6_K, dequantize_row_q6_K>));
    // IQ4_XS: kernels in matmul_iq4xs_*.cpp (not routed through the per-ISA providers).
    WeightTypeTraits xs = make_entry(GgmlType::IQ4_XS, GgmlType::Q8_K, 256, sizeof(block_iq4_xs), q8_K,
                                     quant_to_f32<block_iq4_xs, dequantize_row_iq4_xs>);
    xs.kernels[(int)Isa::kScalar] = iq4xs::kernel_scalar(GgmlType::IQ4_XS);
    xs.kernels[(int)Isa::kAvx2] = iq4xs::kernel_avx2(GgmlType::IQ4_XS);
    xs.kernels[(int)Isa::kAvx512] = iq4xs::kernel_avx512(GgmlType::IQ4_XS);
    xs.kernels[(int)Isa::kAvx512Vnni] = iq4xs::kernel_avx512vnni(GgmlType::IQ4_XS);
    entries.push_back(xs);
    entries.push_back(make_entry(GgmlType::TQ1_0, GgmlType::Q8_K, 256, sizeof(block_tq1_0), q8_K,
                                 quant_to_f32<block_tq1_0, dequantize_row_tq1_0>));
    entries.push_back(make_entry(GgmlType::TQ2_0, GgmlType::Q8_K, 256, sizeof(block_tq2_0), q8_K,
                                 quant_to_f32<block_tq2_0, dequantize_row_tq2_0>));
    // I2_S (quant/i2s.h): 256 elements per 64 bytes as the kernels see it
    // (rows must be a multiple of 256 for the Q8_K activations); per-tensor scale.
    WeightTypeTraits i2s = make_entry(GgmlType::I2_S, GgmlType::Q8_K, 256, 64, q8_K, i2s_codes_to_f32);
    i2s.tail_f32_scale = true;
    entries.push_back(i2s);
  }
};

const Table& table() {
  static const Table t;
  return t;
}

// Fallback order when an ISA level has no kernel of its own.
Isa lower_isa(Isa isa) {
  switch (isa) {
    case Isa::kAmx: return Isa::kAvx512Vnni;
    case Isa::kAvx512Vnni: return Isa::kAvx512;
    case Isa::kAvx512: return Isa::kAvx2;
    case Isa::kAvx2Vnni: return Isa::kAvx2;
    default: return Isa::kScalar;
  }
}

}  // namespace

const WeightTypeTraits* weight_type_traits(format::GgmlType type) {
  for (const WeightTypeTraits& e : table().entries) {
    if (e.type == type) return &e;
  }
  return nullptr;
}

const MatmulKernel* matmul_kernel(format::GgmlType type, Isa isa) {
  const WeightTypeTraits* t = weight_type_traits(type);
  if (!t) return nullptr;
  for (;;) {
    const MatmulKernel& k = t->kernels[(int)isa];
    if (k.gemm) return &k;
    if (isa == Isa::kScalar) return nullptr;
    isa = lower_isa(isa);
  }
}

}  // namespace chimera::kernels
