// Hugging Face family table: phi4flash (Phi-4-mini-flash-reasoning; docs/PHI4FLASH.md).
#include <algorithm>
#include <cmath>

#include "format/hf/hf_family_util.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

// ---- phi4flash (Phi-4-mini-flash-reasoning, SambaY) -------------------------
// Layer kinds; see docs/PHI4FLASH.md and ARCHITECTURES.md §1.2.
enum Phi4FlashKind { kP4Mamba = 0, kP4SelfAttn = 1, kP4Gmu = 2, kP4CrossAttn = 3 };

Status phi4flash_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  std::vector<int>* kinds = &plan->kinds;
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, get_int(c, "hidden_size", 2560));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, get_int(c, "num_hidden_layers", 32));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, get_int(c, "intermediate_size", 10240));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, get_int(c, "num_attention_heads", 40));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, get_int(c, "num_key_value_heads", 20));
  CHIMERA_ASSIGN_OR_RETURN(int64_t window, get_int(c, "sliding_window", 512));
  CHIMERA_ASSIGN_OR_RETURN(int64_t period, get_int(c, "mb_per_layer", 2));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, get_int(c, "max_position_embeddings", 262144));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, get_int(c, "mamba_d_state", 16));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, get_int(c, "mamba_d_conv", 4));
  CHIMERA_ASSIGN_OR_RETURN(int64_t expand, get_int(c, "mamba_expand", 2));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "layer_norm_eps", 1e-5));
  int64_t dt_rank = (d + 15) / 16;  // "auto"
  if (auto it = c.find("mamba_dt_rank"); it != c.end() && !it->is_null() && !(it->is_string() && *it == "auto")) {
    CHIMERA_ASSIGN_OR_RETURN(dt_rank, get_int(c, "mamba_dt_rank", dt_rank));
  }
  if (d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if (n_head % 2 != 0 || n_kv % 2 != 0)
    return invalid_argument("differential attention pairs heads: head counts must be even");
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  if (n_layer % 2 != 0 || n_layer < 4) return invalid_argument("num_hidden_layers must be even and >= 4");
  const int64_t half = n_layer / 2;
  if (half % period != 0)
    return invalid_argument("num_hidden_layers/2 must be a multiple of mb_per_layer (layer L/2 is the memory Mamba layer)");
  if (period < 2) return invalid_argument("mb_per_layer must be >= 2 (layer L/2+1 must be attention)");
  const std::string a = "phi4flash.";
  set_u32s(w, "phi4flash",
           {{"context_length", ctx}, {"embedding_length", d}, {"block_count", n_layer}, {"feed_forward_length", n_ff},
            {"attention.head_count", n_head}, {"attention.head_count_kv", n_kv},
            {"attention.key_length", d / n_head}, {"attention.value_length", d / n_head}});
  w.set(a + "attention.layer_norm_epsilon", GgufValue::from_f32((float)eps));
  set_u32s(w, "phi4flash",
           {{"attention.sliding_window", window}, {"ssm.conv_kernel", d_conv}, {"ssm.inner_size", expand * d},
            {"ssm.state_size", d_state}, {"ssm.time_step_rank", dt_rank}, {"mamba_period", period}});
  kinds->assign((size_t)n_layer, kP4Mamba);
  for (int64_t i = 0; i < n_layer; ++i) {
    const bool mamba = i % period == 0;
    const bool cross = i >= half + 2;
    (*kinds)[(size_t)i] = cross ? (mamba ? kP4Gmu : kP4CrossAttn) : (mamba ? kP4Mamba : kP4SelfAttn);
  }
  return Status::ok();
}

constexpr KindMask kMamba = 1u << kP4Mamba;
constexpr KindMask kSelf = 1u << kP4SelfAttn;
constexpr KindMask kGmu = 1u << kP4Gmu;
constexpr KindMask kCross = 1u << kP4CrossAttn;
constexpr KindMask kAttn = kSelf | kCross;

}  // namespace

FamilySpec phi4flash_spec() {
  const Transform N = Transform::kNone;
  return FamilySpec{
      {"phi4flash"},
      "phi4flash",
      &phi4flash_hparams,
      {
          {"model.embed_tokens.weight", tn::kTokenEmbd},
          {"model.final_layernorm.weight", tn::kOutputNorm},
          {"model.final_layernorm.bias", tn::kOutputNormBias},
          {"lm_head.weight", tn::kOutput, kAllKinds, N, false, /*optional=*/true},
          {"model.layers.{i}.input_layernorm.weight", tn::kAttnNorm},
          {"model.layers.{i}.input_layernorm.bias", tn::kAttnNormBias},
          // Mamba-1 mixers (layers i % period == 0 below L/2 + 2).
          {"model.layers.{i}.attn.in_proj.weight", tn::kSsmIn, kMamba},
          {"model.layers.{i}.attn.in_proj.bias", tn::kSsmInBias, kMamba, N, false, true},
          {"model.layers.{i}.attn.conv1d.weight", tn::kSsmConv1d, kMamba, Transform::kSqueezeMiddle},
          {"model.layers.{i}.attn.conv1d.bias", tn::kSsmConv1dBias, kMamba, N, false, true},
          {"model.layers.{i}.attn.x_proj.weight", tn::kSsmX, kMamba},
          {"model.layers.{i}.attn.dt_proj.weight", tn::kSsmDt, kMamba},
          {"model.layers.{i}.attn.dt_proj.bias", tn::kSsmDtBias, kMamba},
          {"model.layers.{i}.attn.A_log", tn::kSsmA, kMamba, Transform::kNegExp},
          {"model.layers.{i}.attn.D", tn::kSsmD, kMamba},
          {"model.layers.{i}.attn.out_proj.weight", tn::kSsmOut, kMamba},
          {"model.layers.{i}.attn.out_proj.bias", tn::kSsmOutBias, kMamba, N, false, true},
          // Gated memory units (cross decoder, i % period == 0).
          {"model.layers.{i}.attn.in_proj.weight", tn::kGmuIn, kGmu},
          {"model.layers.{i}.attn.out_proj.weight", tn::kGmuOut, kGmu},
          // Differential attention: self layers have fused q|k|v, cross layers q only.
          {"model.layers.{i}.attn.Wqkv.weight", tn::kAttnQkv, kSelf},
          {"model.layers.{i}.attn.Wqkv.bias", tn::kAttnQkvBias, kSelf, N, false, true},
          {"model.layers.{i}.attn.Wqkv.weight", tn::kAttnQ, kCross},
          {"model.layers.{i}.attn.Wqkv.bias", tn::kAttnQBias, kCross, N, false, true},
          {"model.layers.{i}.attn.out_proj.weight", tn::kAttnOutput, kAttn},
          {"model.layers.{i}.attn.out_proj.bias", tn::kAttnOutputBias, kAttn, N, false, true},
          {"model.layers.{i}.attn.inner_cross_attn.lambda_q1", tn::kAttnLambdaQ1, kAttn},
          {"model.layers.{i}.attn.inner_cross_attn.lambda_k1", tn::kAttnLambdaK1, kAttn},
          {"model.layers.{i}.attn.inner_cross_attn.lambda_q2", tn::kAttnLambdaQ2, kAttn},
          {"model.layers.{i}.attn.inner_cross_attn.lambda_k2", tn::kAttnLambdaK2, kAttn},
          {"model.layers.{i}.attn.inner_cross_attn.subln.weight", tn::kAttnSubNorm, kAttn},
          {"model.layers.{i}.post_attention_layernorm.weight", tn::kFfnNorm},
          {"model.layers.{i}.post_attention_layernorm.bias", tn::kFfnNormBias},
          // fc1 stays fused [gate | up] (gate first), as llama.cpp's phi3 ffn_up.
          {"model.layers.{i}.mlp.fc1.weight", tn::kFfnUp},
          {"model.layers.{i}.mlp.fc2.weight", tn::kFfnDown},
      }};
}

}  // namespace chimera::format::hf
