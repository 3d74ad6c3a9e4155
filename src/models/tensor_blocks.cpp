// Shared tensor-table blocks (see tensor_blocks.h). Synthetic values: weights
// normal(0.02); Mamba conv kernels normal(0.2), conv biases 0, dt biases
// normal(0.5), A = -1 (A_log = 0: a stable decay), D and norms 1.
#include "models/tensor_blocks.h"

namespace chimera::models {

namespace {
using R = quant::TensorRole;
constexpr Need kReq = Need::kRequired, kOpt = Need::kOptional;
}  // namespace

std::vector<TensorEntry> attention_entries(std::string_view tag, Need bias, SynthFill bias_fill) {
  return {
      {tn::kAttnQ, {"n_embd", "n_head*head_dim"}, R::kAttnQ, kReq, tag},
      {tn::kAttnQBias, {"n_head*head_dim"}, R::kBias, bias, tag, bias_fill},
      {tn::kAttnK, {"n_embd", "n_head_kv*head_dim"}, R::kAttnK, kReq, tag},
      {tn::kAttnKBias, {"n_head_kv*head_dim"}, R::kBias, bias, tag, bias_fill},
      {tn::kAttnV, {"n_embd", "n_head_kv*head_dim_v"}, R::kAttnV, kReq, tag},
      {tn::kAttnVBias, {"n_head_kv*head_dim_v"}, R::kBias, bias, tag, bias_fill},
      {tn::kAttnOutput, {"n_head*head_dim_v", "n_embd"}, R::kAttnOutput, kReq, tag},
      {tn::kAttnOutputBias, {"n_embd"}, R::kBias, bias, tag, bias_fill},
  };
}

std::vector<TensorEntry> gated_ffn_entries(std::string_view tag) {
  return {
      {tn::kFfnGate, {"n_embd", "n_ff"}, R::kFfnGate, kReq, tag},
      {tn::kFfnGateBias, {"n_ff"}, R::kBias, kOpt, tag},
      {tn::kFfnUp, {"n_embd", "n_ff"}, R::kFfnUp, kReq, tag},
      {tn::kFfnUpBias, {"n_ff"}, R::kBias, kOpt, tag},
      {tn::kFfnDown, {"n_ff", "n_embd"}, R::kFfnDown, kReq, tag},
      {tn::kFfnDownBias, {"n_embd"}, R::kBias, kOpt, tag},
  };
}

std::vector<TensorEntry> moe_entries(std::string_view tag) {
  return {
      {tn::kFfnGateInp, {"n_embd", "n_expert"}, R::kFfnRouter, kReq, tag},
      {tn::kFfnGateInpBias, {"n_expert"}, R::kBias, kOpt, tag},
      {tn::kFfnGateExps, {"n_embd", "n_ff", "n_expert"}, R::kExpertGate, kReq, tag},
      {tn::kFfnUpExps, {"n_embd", "n_ff", "n_expert"}, R::kExpertUp, kReq, tag},
      {tn::kFfnDownExps, {"n_ff", "n_embd", "n_expert"}, R::kExpertDown, kReq, tag},
  };
}

std::vector<TensorEntry> shared_expert_entries(std::string_view tag) {
  return {
      {tn::kFfnGateShexp, {"n_embd", "n_ff_shexp"}, R::kShexpGate, kReq, tag},
      {tn::kFfnGateShexpBias, {"n_ff_shexp"}, R::kBias, kOpt, tag},
      {tn::kFfnUpShexp, {"n_embd", "n_ff_shexp"}, R::kShexpUp, kReq, tag},
      {tn::kFfnUpShexpBias, {"n_ff_shexp"}, R::kBias, kOpt, tag},
      {tn::kFfnDownShexp, {"n_ff_shexp", "n_embd"}, R::kShexpDown, kReq, tag},
      {tn::kFfnDownShexpBias, {"n_embd"}, R::kBias, kOpt, tag},
  };
}

std::vector<TensorEntry> mamba1_entries(std::string_view tag) {
  return {
      {tn::kSsmIn, {"n_embd", "2*d_inner"}, R::kSsmIn, kReq, tag},
      {tn::kSsmInBias, {"2*d_inner"}, R::kBias, kOpt, tag},
      {tn::kSsmConv1d, {"d_conv", "d_inner"}, R::kSsmConv, kReq, tag, fill_normal(0.2f)},
      {tn::kSsmConv1dBias, {"d_inner"}, R::kBias, kReq, tag, kFillZeros},
      {tn::kSsmX, {"d_inner", "dt_rank+2*d_state"}, R::kSsmX, kReq, tag},
      {tn::kSsmDt, {"dt_rank", "d_inner"}, R::kSsmDt, kReq, tag},
      {tn::kSsmDtBias, {"d_inner"}, R::kSsmParam, kReq, tag, fill_normal(0.5f)},
      {tn::kSsmA, {"d_state", "d_inner"}, R::kSsmParam, kReq, tag, fill_constant(-1.0f)},
      {tn::kSsmD, {"d_inner"}, R::kSsmParam, kReq, tag, kFillOnes},
      {tn::kSsmOut, {"d_inner", "n_embd"}, R::kSsmOut, kReq, tag},
      {tn::kSsmOutBias, {"n_embd"}, R::kBias, kOpt, tag},
  };
}

std::vector<TensorEntry> mamba2_entries(std::string_view tag, Need conv_bias) {
  // ssm_in packs [z, x, B, C, dt]; the conv runs over [x, B, C].
  return {
      {tn::kSsmIn, {"n_embd", "2*d_inner+2*n_group*d_state+ssm_n_head"}, R::kSsmIn, kReq, tag},
      {tn::kSsmInBias, {"2*d_inner+2*n_group*d_state+ssm_n_head"}, R::kBias, kOpt, tag},
      {tn::kSsmConv1d, {"d_conv", "d_inner+2*n_group*d_state"}, R::kSsmConv, kReq, tag,
       fill_normal(0.2f)},
      {tn::kSsmConv1dBias, {"d_inner+2*n_group*d_state"}, R::kBias, conv_bias, tag, kFillZeros},
      {tn::kSsmDtBias, {"ssm_n_head"}, R::kSsmParam, kReq, tag, fill_normal(0.5f)},
      {tn::kSsmA, {"1", "ssm_n_head"}, R::kSsmParam, kReq, tag, fill_constant(-1.0f)},
      {tn::kSsmD, {"1", "ssm_n_head"}, R::kSsmParam, kReq, tag, kFillOnes},
      {tn::kSsmNorm, {"d_inner/n_group", "n_group"}, R::kNorm, kReq, tag, kFillOnes},
      {tn::kSsmOut, {"d_inner", "n_embd"}, R::kSsmOut, kReq, tag},
      {tn::kSsmOutBias, {"n_embd"}, R::kBias, kOpt, tag},
  };
}

TensorTable make_table(std::initializer_list<std::vector<TensorEntry>> parts) {
  TensorTable t;
  for (const auto& p : parts) t.entries.insert(t.entries.end(), p.begin(), p.end());
  return t;
}

}  // namespace chimera::models
