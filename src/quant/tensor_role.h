// What a model tensor is for, as a family's tensor table (models/tensor_table.h)
// declares it. The quantization rules (quantize_model.h) key on the role when
// the model's architecture is known and fall back to llama.cpp's name patterns
// otherwise; synth reads it through the same tables.
#pragma once

#include <cstdint>
#include <string_view>

namespace chimera::quant {

enum class TensorRole : uint8_t {
  kUnknown,       // not from a table: the rules look at the name
  kTokenEmbd,     // token_embd.weight (the lm-head too when there is no output.weight)
  kOutput,        // output.weight, the lm-head
  kNorm,          // norm weights and biases (1-D, or Mamba-2's grouped ssm_norm)
  kBias,          // projection biases
  kScale,         // per-tensor scalars (BitNet's weight scales)
  kRopeFactors,   // rope_freqs / LongRoPE factors
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnQkv,       // fused q|k|v projection
  kAttnOutput,
  kAttnParam,     // small learned attention vectors (differential attention's lambdas)
  kFfnGate,
  kFfnUp,         // also a fused [gate | up]
  kFfnDown,
  kFfnRouter,     // MoE router (ffn_gate_inp)
  kExpertGate,    // 3-D expert stacks
  kExpertUp,
  kExpertDown,
  kShexpGate,     // shared expert
  kShexpUp,
  kShexpDown,
  kSsmIn,
  kSsmConv,       // conv1d kernel
  kSsmX,          // Mamba-1 x_proj
  kSsmDt,         // Mamba-1 dt_proj
  kSsmParam,      // dt bias, A, D
  kSsmOut,
  kGmuIn,
  kGmuOut,
};

// "attn_v", "ffn_down", ... (tables, error messages, tests).
std::string_view tensor_role_name(TensorRole r);

// Weight matrices (2-D or expert stacks) that the quantization mixes may store
// quantized; the rest (norms, biases, router, conv kernels, SSM parameters,
// rope factors) keep full precision, as llama.cpp does.
bool is_matrix_role(TensorRole r);

}  // namespace chimera::quant
