// The GGUF tensor names chimera reads and writes, as llama.cpp spells them:
// one constant per name pattern ("{i}" = the layer index). The families'
// tensor tables (models/<family>_tensors.cpp, tensor_blocks.cpp) are built
// from these patterns, and every other place that names a GGUF tensor -- the
// converters (format/hf/hf_family_*.cpp, format/llama2c, format/bitnet_llama2c),
// the families' weight binding (models/*.cpp), expert placement -- uses the
// same constants, so each name is spelled once. The tables decide which of
// them a family has, with which shape (the converters' output is checked
// against its table before it is written: ConvertOptions::check_tensors).
// This header sits in format/ because the converters sit below models/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace chimera::format::tn {

// "blk.{i}": the prefix of layer i's tensors (layers::bind_* helpers append
// the rest of the name).
inline constexpr char kLayerPrefix[] = "blk.{i}";

// Whole-model tensors.
inline constexpr char kOutputBias[] = "output.bias";
inline constexpr char kOutput[] = "output.weight";
inline constexpr char kOutputNormBias[] = "output_norm.bias";
inline constexpr char kOutputNorm[] = "output_norm.weight";
inline constexpr char kRopeFactorsLong[] = "rope_factors_long.weight";
inline constexpr char kRopeFactorsShort[] = "rope_factors_short.weight";
inline constexpr char kRopeFreqs[] = "rope_freqs.weight";
inline constexpr char kTokenEmbd[] = "token_embd.weight";

// Per-layer tensors.
inline constexpr char kAttnKBias[] = "blk.{i}.attn_k.bias";
inline constexpr char kAttnKScale[] = "blk.{i}.attn_k.scale";
inline constexpr char kAttnK[] = "blk.{i}.attn_k.weight";
inline constexpr char kAttnLambdaK1[] = "blk.{i}.attn_lambda_k1.weight";
inline constexpr char kAttnLambdaK2[] = "blk.{i}.attn_lambda_k2.weight";
inline constexpr char kAttnLambdaQ1[] = "blk.{i}.attn_lambda_q1.weight";
inline constexpr char kAttnLambdaQ2[] = "blk.{i}.attn_lambda_q2.weight";
inline constexpr char kAttnNormBias[] = "blk.{i}.attn_norm.bias";
inline constexpr char kAttnNorm[] = "blk.{i}.attn_norm.weight";
inline constexpr char kAttnOutputBias[] = "blk.{i}.attn_output.bias";
inline constexpr char kAttnOutputScale[] = "blk.{i}.attn_output.scale";
inline constexpr char kAttnOutput[] = "blk.{i}.attn_output.weight";
inline constexpr char kAttnQBias[] = "blk.{i}.attn_q.bias";
inline constexpr char kAttnQScale[] = "blk.{i}.attn_q.scale";
inline constexpr char kAttnQ[] = "blk.{i}.attn_q.weight";
inline constexpr char kAttnQkvBias[] = "blk.{i}.attn_qkv.bias";
inline constexpr char kAttnQkv[] = "blk.{i}.attn_qkv.weight";
inline constexpr char kAttnSubNorm[] = "blk.{i}.attn_sub_norm.weight";
inline constexpr char kAttnVBias[] = "blk.{i}.attn_v.bias";
inline constexpr char kAttnVScale[] = "blk.{i}.attn_v.scale";
inline constexpr char kAttnV[] = "blk.{i}.attn_v.weight";

inline constexpr char kFfnDownBias[] = "blk.{i}.ffn_down.bias";
inline constexpr char kFfnDownScale[] = "blk.{i}.ffn_down.scale";
inline constexpr char kFfnDown[] = "blk.{i}.ffn_down.weight";
inline constexpr char kFfnDownExps[] = "blk.{i}.ffn_down_exps.weight";
inline constexpr char kFfnDownShexpBias[] = "blk.{i}.ffn_down_shexp.bias";
inline constexpr char kFfnDownShexp[] = "blk.{i}.ffn_down_shexp.weight";
inline constexpr char kFfnGateBias[] = "blk.{i}.ffn_gate.bias";
inline constexpr char kFfnGateScale[] = "blk.{i}.ffn_gate.scale";
inline constexpr char kFfnGate[] = "blk.{i}.ffn_gate.weight";
inline constexpr char kFfnGateExps[] = "blk.{i}.ffn_gate_exps.weight";
inline constexpr char kFfnGateInpBias[] = "blk.{i}.ffn_gate_inp.bias";
inline constexpr char kFfnGateInp[] = "blk.{i}.ffn_gate_inp.weight";
inline constexpr char kFfnGateShexpBias[] = "blk.{i}.ffn_gate_shexp.bias";
inline constexpr char kFfnGateShexp[] = "blk.{i}.ffn_gate_shexp.weight";
inline constexpr char kFfnNormBias[] = "blk.{i}.ffn_norm.bias";
inline constexpr char kFfnNorm[] = "blk.{i}.ffn_norm.weight";
inline constexpr char kFfnSubNorm[] = "blk.{i}.ffn_sub_norm.weight";
inline constexpr char kFfnUpBias[] = "blk.{i}.ffn_up.bias";
inline constexpr char kFfnUpScale[] = "blk.{i}.ffn_up.scale";
inline constexpr char kFfnUp[] = "blk.{i}.ffn_up.weight";
inline constexpr char kFfnUpExps[] = "blk.{i}.ffn_up_exps.weight";
inline constexpr char kFfnUpShexpBias[] = "blk.{i}.ffn_up_shexp.bias";
inline constexpr char kFfnUpShexp[] = "blk.{i}.ffn_up_shexp.weight";

inline constexpr char kGmuInBias[] = "blk.{i}.gmu_in.bias";
inline constexpr char kGmuIn[] = "blk.{i}.gmu_in.weight";
inline constexpr char kGmuOutBias[] = "blk.{i}.gmu_out.bias";
inline constexpr char kGmuOut[] = "blk.{i}.gmu_out.weight";

inline constexpr char kSsmA[] = "blk.{i}.ssm_a";
inline constexpr char kSsmConv1dBias[] = "blk.{i}.ssm_conv1d.bias";
inline constexpr char kSsmConv1d[] = "blk.{i}.ssm_conv1d.weight";
inline constexpr char kSsmD[] = "blk.{i}.ssm_d";
inline constexpr char kSsmDtBias[] = "blk.{i}.ssm_dt.bias";
inline constexpr char kSsmDt[] = "blk.{i}.ssm_dt.weight";
inline constexpr char kSsmInBias[] = "blk.{i}.ssm_in.bias";
inline constexpr char kSsmIn[] = "blk.{i}.ssm_in.weight";
inline constexpr char kSsmNorm[] = "blk.{i}.ssm_norm.weight";
inline constexpr char kSsmOutBias[] = "blk.{i}.ssm_out.bias";
inline constexpr char kSsmOut[] = "blk.{i}.ssm_out.weight";
inline constexpr char kSsmX[] = "blk.{i}.ssm_x.weight";

// pattern with "{i}" replaced by layer (a whole-model name is returned as is).
std::string at(std::string_view pattern, int64_t layer);
// at(kLayerPrefix, layer): "blk.<layer>".
std::string layer_prefix(int64_t layer);
// Layer tensors named from a layer prefix (the layers::bind_* helpers get
// "blk.<i>"): in(prefix, pattern) = the pattern's name in that layer
// (in("blk.3", kSsmA) = "blk.3.ssm_a"); linear(prefix, pattern) = the same
// without ".weight", the stem layers::bind_linear appends ".weight" and
// ".bias" to (linear("blk.3", kAttnQ) = "blk.3.attn_q").
std::string in(std::string_view prefix, std::string_view pattern);
std::string linear(std::string_view prefix, std::string_view pattern);
// The layer index of a per-layer tensor name ("blk.12.attn_q.weight" -> 12),
// or -1 for a whole-model name.
int64_t layer_of(std::string_view name);

}  // namespace chimera::format::tn
