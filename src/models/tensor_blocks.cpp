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
      {"blk.{i}.attn_q.weight", {"n_embd", "n_head*head_dim"}, R::kAttnQ, kReq, tag},
      {"blk.{i}.attn_q.bias", {"n_head*head_dim"}, R::kBias, bias, tag, bias_fill},
      {"blk.{i}.attn_k.weight", {"n_embd", "n_head_kv*head_dim"}, R::kAttnK, kReq, tag},
      {"blk.{i}.attn_k.bias", {"n_head_kv*head_dim"}, R::kBias, bias, tag, bias_fill},
      {"blk.{i}.attn_v.weight", {"n_embd", "n_head_kv*head_dim_v"}, R::kAttnV, kReq, tag},
      {"blk.{i}.attn_v.bias", {"n_head_kv*head_dim_v"}, R::kBias, bias, tag, bias_fill},
      {"blk.{i}.attn_output.weight", {"n_head*head_dim_v", "n_embd"}, R::kAttnOutput, kReq, tag},
      {"blk.{i}.attn_output.bias", {"n_embd"}, R::kBias, bias, tag, bias_fill},
  };
}

std::vector<TensorEntry> gated_ffn_entries(std::string_view tag) {
  return {
      {"blk.{i}.ffn_gate.weight", {"n_embd", "n_ff"}, R::kFfnGate, kReq, tag},
      {"blk.{i}.ffn_gate.bias", {"n_ff"}, R::kBias, kOpt, tag},
      {"blk.{i}.ffn_up.weight", {"n_embd", "n_ff"}, R::kFfnUp, kReq, tag},
      {"blk.{i}.ffn_up.bias", {"n_ff"}, R::kBias, kOpt, tag},
      {"blk.{i}.ffn_down.weight", {"n_ff", "n_embd"}, R::kFfnDown, kReq, tag},
      {"blk.{i}.ffn_down.bias", {"n_embd"}, R::kBias, kOpt, tag},
  };
}

std::vector<TensorEntry> moe_entries(std::string_view tag) {
  return {
      {"blk.{i}.ffn_gate_inp.weight", {"n_embd", "n_expert"}, R::kFfnRouter, kReq, tag},
      {"blk.{i}.ffn_gate_inp.bias", {"n_expert"}, R::kBias, kOpt, tag},
      {"blk.{i}.ffn_gate_exps.weight", {"n_embd", "n_ff", "n_expert"}, R::kExpertGate, kReq, tag},
      {"blk.{i}.ffn_up_exps.weight", {"n_embd", "n_ff", "n_expert"}, R::kExpertUp, kReq, tag},
      {"blk.{i}.ffn_down_exps.weight", {"n_ff", "n_embd", "n_expert"}, R::kExpertDown, kReq, tag},
  };
}

std::vector<TensorEntry> shared_expert_entries(std::string_view tag) {
  return {
      {"blk.{i}.ffn_gate_shexp.weight", {"n_embd", "n_ff_shexp"}, R::kShexpGate, kReq, tag},
      {"blk.{i}.ffn_gate_shexp.bias", {"n_ff_shexp"}, R::kBias, kOpt, tag},
      {"blk.{i}.ffn_up_shexp.weight", {"n_embd", "n_ff_shexp"}, R::kShexpUp, kReq, tag},
      {"blk.{i}.ffn_up_shexp.bias", {"n_ff_shexp"}, R::kBias, kOpt, tag},
      {"blk.{i}.ffn_down_shexp.weight", {"n_ff_shexp", "n_embd"}, R::kShexpDown, kReq, tag},
      {"blk.{i}.ffn_down_shexp.bias", {"n_embd"}, R::kBias, kOpt, tag},
  };
}

std::vector<TensorEntry> mamba1_entries(std::string_view tag) {
  return {
      {"blk.{i}.ssm_in.weight", {"n_embd", "2*d_inner"}, R::kSsmIn, kReq, tag},
      {"blk.{i}.ssm_in.bias", {"2*d_inner"}, R::kBias, kOpt, tag},
      {"blk.{i}.ssm_conv1d.weight", {"d_conv", "d_inner"}, R::kSsmConv, kReq, tag, fill_normal(0.2f)},
      {"blk.{i}.ssm_conv1d.bias", {"d_inner"}, R::kBias, kReq, tag, kFillZeros},
      {"blk.{i}.ssm_x.weight", {"d_inner", "dt_rank+2*d_state"}, R::kSsmX, kReq, tag},
      {"blk.{i}.ssm_dt.weight", {"dt_rank", "d_inner"}, R::kSsmDt, kReq, tag},
      {"blk.{i}.ssm_dt.bias", {"d_inner"}, R::kSsmParam, kReq, tag, fill_normal(0.5f)},
      {"blk.{i}.ssm_a", {"d_state", "d_inner"}, R::kSsmParam, kReq, tag, fill_constant(-1.0f)},
      {"blk.{i}.ssm_d", {"d_inner"}, R::kSsmParam, kReq, tag, kFillOnes},
      {"blk.{i}.ssm_out.weight", {"d_inner", "n_embd"}, R::kSsmOut, kReq, tag},
      {"blk.{i}.ssm_out.bias", {"n_embd"}, R::kBias, kOpt, tag},
  };
}

std::vector<TensorEntry> mamba2_entries(std::string_view tag, Need conv_bias) {
  // ssm_in packs [z, x, B, C, dt]; the conv runs over [x, B, C].
  return {
      {"blk.{i}.ssm_in.weight", {"n_embd", "2*d_inner+2*n_group*d_state+ssm_n_head"}, R::kSsmIn, kReq, tag},
      {"blk.{i}.ssm_in.bias", {"2*d_inner+2*n_group*d_state+ssm_n_head"}, R::kBias, kOpt, tag},
      {"blk.{i}.ssm_conv1d.weight", {"d_conv", "d_inner+2*n_group*d_state"}, R::kSsmConv, kReq, tag,
       fill_normal(0.2f)},
      {"blk.{i}.ssm_conv1d.bias", {"d_inner+2*n_group*d_state"}, R::kBias, conv_bias, tag, kFillZeros},
      {"blk.{i}.ssm_dt.bias", {"ssm_n_head"}, R::kSsmParam, kReq, tag, fill_normal(0.5f)},
      {"blk.{i}.ssm_a", {"1", "ssm_n_head"}, R::kSsmParam, kReq, tag, fill_constant(-1.0f)},
      {"blk.{i}.ssm_d", {"1", "ssm_n_head"}, R::kSsmParam, kReq, tag, kFillOnes},
      {"blk.{i}.ssm_norm.weight", {"d_inner/n_group", "n_group"}, R::kNorm, kReq, tag, kFillOnes},
      {"blk.{i}.ssm_out.weight", {"d_inner", "n_embd"}, R::kSsmOut, kReq, tag},
      {"blk.{i}.ssm_out.bias", {"n_embd"}, R::kBias, kOpt, tag},
  };
}

TensorTable make_table(std::initializer_list<std::vector<TensorEntry>> parts) {
  TensorTable t;
  for (const auto& p : parts) t.entries.insert(t.entries.end(), p.begin(), p.end());
  return t;
}

}  // namespace chimera::models
