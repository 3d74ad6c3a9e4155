// Hugging Face family tables: mamba2 and mamba (docs/CONVERT.md).
#include <algorithm>
#include <cmath>

#include "format/hf/hf_family_util.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

// ---- mamba2 (Mamba2ForCausalLM) and mamba (MambaForCausalLM) ----------------
// Keys, defaults and reshapes as llama.cpp's Mamba2Model / MambaModel write
// them (docs/CONVERT.md lists every config key read). One layer kind.
Status mamba2_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, pick(c, {"hidden_size", "d_model"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, pick(c, {"num_hidden_layers", "n_layer"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t expand, get_int(c, pick(c, {"mamba_expand", "expand"}), 2));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_inner, get_int(c, pick(c, {"mamba_d_ssm", "intermediate_size", "d_inner"}), expand * d));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_group, get_int(c, "n_groups", 1));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, get_int(c, pick(c, {"conv_kernel", "d_conv"}), 4));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, get_int(c, pick(c, {"state_size", "d_state"}), 128));
  CHIMERA_ASSIGN_OR_RETURN(int64_t head_dim, get_int(c, pick(c, {"mamba_d_head", "head_dim"}), 64));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, pick(c, {"layer_norm_epsilon", "rms_norm_eps"}), 1e-5));
  CHIMERA_ASSIGN_OR_RETURN(plan->vocab_size, padded_vocab(c, 16));
  if (d_inner != expand * d) return invalid_argument("the SSM inner size must be expand * hidden_size");
  if (d_inner % head_dim != 0) return invalid_argument("the SSM inner size must be a multiple of 'head_dim'");
  if (d_inner % n_group != 0) return invalid_argument("the SSM inner size must be a multiple of 'n_groups'");
  if (auto it = c.find("num_heads"); it != c.end() && !it->is_null()) {
    CHIMERA_ASSIGN_OR_RETURN(int64_t nh, get_int(c, "num_heads", 0));
    if (nh * head_dim != d_inner) return invalid_argument("'num_heads' * 'head_dim' must equal expand * hidden_size");
  }
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "use_bias", false, "mamba2"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "rms_norm", true, "mamba2"));
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for mamba2");
  set_u32s(w, "mamba2",
           {{"context_length", int64_t(1) << 20}, {"embedding_length", d}, {"feed_forward_length", 0},
            {"attention.head_count", 0}, {"block_count", n_layer}, {"ssm.conv_kernel", d_conv},
            {"ssm.inner_size", d_inner}, {"ssm.state_size", d_state}, {"ssm.time_step_rank", d_inner / head_dim},
            {"ssm.group_count", n_group}});
  w.set("mamba2.attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_group = n_group;
  return Status::ok();
}


Status mamba_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, pick(c, {"hidden_size", "d_model"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, pick(c, {"num_hidden_layers", "n_layer"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, get_int(c, pick(c, {"conv_kernel", "d_conv"}), 4));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_inner, get_int(c, pick(c, {"intermediate_size", "d_inner"}), 2 * d));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, get_int(c, pick(c, {"state_size", "d_state"}), 16));
  const char* rank_key = pick(c, {"time_step_rank", "dt_rank"});
  int64_t dt_rank = (d + 15) / 16;  // "auto"
  if (auto it = c.find(rank_key); it != c.end() && !it->is_null() && !(it->is_string() && *it == "auto")) {
    CHIMERA_ASSIGN_OR_RETURN(dt_rank, get_int(c, rank_key, dt_rank));
  }
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, pick(c, {"layer_norm_epsilon", "rms_norm_eps"}), 1e-5));
  CHIMERA_ASSIGN_OR_RETURN(plan->vocab_size, padded_vocab(c, 8));
  if (d_inner != 2 * d) return invalid_argument("the SSM inner size ('intermediate_size') must be 2 * hidden_size");
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "use_bias", false, "mamba"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "rms_norm", true, "mamba"));
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for mamba");
  set_u32s(w, "mamba",
           {{"context_length", int64_t(1) << 20}, {"embedding_length", d}, {"feed_forward_length", 0},
            {"attention.head_count", 0}, {"block_count", n_layer}, {"ssm.conv_kernel", d_conv},
            {"ssm.inner_size", d_inner}, {"ssm.state_size", d_state}, {"ssm.time_step_rank", dt_rank}});
  w.set("mamba.attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  w.set("mamba.ssm.dt_b_c_rms", GgufValue::from_bool(false));  // true only for falcon_mamba
  plan->kinds.assign((size_t)n_layer, 0);
  return Status::ok();
}

}  // namespace

FamilySpec mamba2_spec() {
  return FamilySpec{
      {"mamba2"},
      "mamba2",
      &mamba2_hparams,
      {
          {.hf = "backbone.embeddings.weight", .gguf = tn::kTokenEmbd},
          {.hf = "backbone.norm_f.weight", .gguf = tn::kOutputNorm},
          {.hf = "lm_head.weight", .gguf = tn::kOutput, .optional = true},
          {.hf = "backbone.layers.{i}.norm.weight", .gguf = tn::kAttnNorm},
          {.hf = "backbone.layers.{i}.mixer.in_proj.weight", .gguf = tn::kSsmIn},
          {.hf = "backbone.layers.{i}.mixer.conv1d.weight", .gguf = tn::kSsmConv1d,
           .transform = Transform::kSqueezeMiddle},
          {.hf = "backbone.layers.{i}.mixer.conv1d.bias", .gguf = tn::kSsmConv1dBias, .optional = true},
          {.hf = "backbone.layers.{i}.mixer.dt_bias", .gguf = tn::kSsmDtBias},
          {.hf = "backbone.layers.{i}.mixer.A_log", .gguf = tn::kSsmA, .transform = Transform::kNegExp,
           .reshape = Reshape::kAppendOne},
          {.hf = "backbone.layers.{i}.mixer.D", .gguf = tn::kSsmD, .reshape = Reshape::kAppendOne},
          {.hf = "backbone.layers.{i}.mixer.norm.weight", .gguf = tn::kSsmNorm, .reshape = Reshape::kGroups},
          {.hf = "backbone.layers.{i}.mixer.out_proj.weight", .gguf = tn::kSsmOut},
      }};
}

FamilySpec mamba_spec() {
  return FamilySpec{
      {"mamba"},
      "mamba",
      &mamba_hparams,
      {
          {.hf = "backbone.embeddings.weight", .gguf = tn::kTokenEmbd},
          {.hf = "backbone.norm_f.weight", .gguf = tn::kOutputNorm},
          {.hf = "lm_head.weight", .gguf = tn::kOutput, .optional = true,
           .drop_if_equal_to = "backbone.embeddings.weight"},
          {.hf = "backbone.layers.{i}.norm.weight", .gguf = tn::kAttnNorm},
          {.hf = "backbone.layers.{i}.mixer.in_proj.weight", .gguf = tn::kSsmIn},
          {.hf = "backbone.layers.{i}.mixer.conv1d.weight", .gguf = tn::kSsmConv1d,
           .transform = Transform::kSqueezeMiddle},
          {.hf = "backbone.layers.{i}.mixer.conv1d.bias", .gguf = tn::kSsmConv1dBias, .optional = true},
          {.hf = "backbone.layers.{i}.mixer.x_proj.weight", .gguf = tn::kSsmX},
          {.hf = "backbone.layers.{i}.mixer.dt_proj.weight", .gguf = tn::kSsmDt},
          {.hf = "backbone.layers.{i}.mixer.dt_proj.bias", .gguf = tn::kSsmDtBias},
          {.hf = "backbone.layers.{i}.mixer.A_log", .gguf = tn::kSsmA, .transform = Transform::kNegExp},
          {.hf = "backbone.layers.{i}.mixer.D", .gguf = tn::kSsmD},
          {.hf = "backbone.layers.{i}.mixer.out_proj.weight", .gguf = tn::kSsmOut},
      }};
}

}  // namespace chimera::format::hf
