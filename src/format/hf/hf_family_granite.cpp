// Hugging Face family table: granitehybrid (Granite 4.0-H; docs/CONVERT.md).
#include <algorithm>
#include <cmath>

#include "format/hf/hf_family_util.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

// ---- granitehybrid (GraniteMoeHybridForCausalLM, Granite 4.0-H) -------------
// llama.cpp's GraniteHybridModel: Mamba-2 layers and attention layers (Q/K rows
// permuted as for llama, although these layers use no RoPE), MoE + shared
// expert (or a dense shared MLP when num_local_experts is 0), the Granite
// multipliers. Layer kind = attention bit | dense bit.
enum GraniteKind { kGhMamba = 0, kGhAttn = 1, kGhMambaDense = 2, kGhAttnDense = 3 };

Status granitehybrid_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, "hidden_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, "num_hidden_layers"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, "num_attention_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, require_int(c, "num_key_value_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, "intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_shared, require_int(c, "shared_intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-6));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_vocab, require_int(c, "vocab_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_conv, require_int(c, "mamba_d_conv"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t d_state, require_int(c, "mamba_d_state"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_group, require_int(c, "mamba_n_groups"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t expand, require_int(c, "mamba_expand"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ssm_head, require_int(c, "mamba_n_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ssm_head_dim, get_int(c, "mamba_d_head", 64));
  int64_t n_expert = 0, n_used = 0;
  if (auto it = c.find("num_local_experts"); it != c.end() && !it->is_null() && !(it->is_number_integer() && *it == 0)) {
    CHIMERA_ASSIGN_OR_RETURN(n_expert, get_int(c, "num_local_experts", 0));
    CHIMERA_ASSIGN_OR_RETURN(n_used, require_int(c, "num_experts_per_tok"));
    if (n_used > n_expert) return invalid_argument("'num_experts_per_tok' exceeds 'num_local_experts'");
  }
  const int64_t d_inner = expand * d;
  if (d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if ((d / n_head) % 2 != 0) return invalid_argument("the attention head size must be even");
  // llama.cpp ignores head_dim for Granite (hidden / heads is the head size); one that differs is refused.
  if (auto it = c.find("head_dim"); it != c.end() && !it->is_null() && !(it->is_number_integer() && *it == d / n_head))
    return unsupported("'head_dim' must equal hidden_size / num_attention_heads for granitehybrid");
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  if (d_inner % n_group != 0) return invalid_argument("the SSM inner size must be a multiple of 'mamba_n_groups'");
  if (d_inner % ssm_head_dim != 0 || d_inner / ssm_head_dim != n_ssm_head)
    return invalid_argument("'mamba_n_heads' * 'mamba_d_head' must equal mamba_expand * hidden_size");
  // Layer kinds: layer_types ("mamba" / "attention"), else attn_layer_indices.
  std::vector<bool> attn((size_t)n_layer, false);
  if (auto lt = c.find("layer_types"); lt != c.end() && !lt->is_null()) {
    if (!lt->is_array() || (int64_t)lt->size() != n_layer)
      return invalid_argument("'layer_types' must list num_hidden_layers entries");
    for (size_t i = 0; i < lt->size(); ++i) {
      const json& x = (*lt)[i];
      if (!x.is_string() || (x != "mamba" && x != "attention"))
        return unsupported("'layer_types'[" + std::to_string(i) + "] must be \"mamba\" or \"attention\"");
      attn[i] = x == "attention";
    }
  } else if (auto ai = c.find("attn_layer_indices"); ai != c.end() && ai->is_array()) {
    for (const json& x : *ai) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= n_layer)
        return invalid_argument("'attn_layer_indices' holds a layer index out of range");
      attn[(size_t)x.get<int64_t>()] = true;
    }
  } else {
    return not_found("missing config key 'layer_types' (or 'attn_layer_indices')");
  }
  if (std::find(attn.begin(), attn.end(), false) == attn.end())
    return unsupported("every layer is attention: llama.cpp converts such checkpoints as arch granite / granitemoe, "
                       "which is not supported here");
  if (auto it = c.find("position_embedding_type"); it != c.end() && !(it->is_string() && *it == "nope"))
    return unsupported("'position_embedding_type' must be \"nope\" for granitehybrid (hybrid layers use no RoPE)");
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "attention_bias", false, "granitehybrid"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "mamba_proj_bias", false, "granitehybrid"));
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for granitehybrid");
  CHIMERA_ASSIGN_OR_RETURN(plan->vocab_size, padded_vocab(c, 8));

  const std::string a = "granitehybrid.";
  set_u32s(w, "granitehybrid",
           {{"vocab_size", n_vocab}, {"rope.dimension_count", d / n_head}, {"block_count", n_layer},
            {"context_length", int64_t(1) << 20}, {"embedding_length", d}, {"feed_forward_length", n_ff},
            {"attention.head_count", n_head}});
  std::vector<int32_t> kv((size_t)n_layer);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = attn[i] ? (int32_t)n_kv : 0;
  w.set(a + "attention.head_count_kv", GgufValue::from_i32s(kv));
  w.set(a + "rope.freq_base", GgufValue::from_f32((float)theta));
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  if (n_expert > 0) {
    set_u32s(w, "granitehybrid", {{"expert_count", n_expert}, {"expert_used_count", n_used}});
    // Not written by llama.cpp (it reads feed_forward_length): the expert width spelled out.
    set_u32s(w, "granitehybrid", {{"expert_feed_forward_length", n_ff}});
  }
  // Granite's multipliers, written when set (llama.cpp skips zero / absent ones).
  for (auto [hf, key] : {std::pair{"attention_multiplier", "attention.scale"}, std::pair{"embedding_multiplier", "embedding_scale"},
                         std::pair{"residual_multiplier", "residual_scale"}, std::pair{"logits_scaling", "logit_scale"}}) {
    auto it = c.find(hf);
    if (it == c.end() || it->is_null()) continue;
    if (!it->is_number()) return invalid_argument(std::string("'") + hf + "' must be a number");
    if (it->get<double>() != 0) w.set(a + key, GgufValue::from_f32(it->get<float>()));
  }
  set_u32s(w, "granitehybrid", {{"expert_shared_feed_forward_length", n_shared}});
  set_u32s(w, "granitehybrid",
           {{"ssm.conv_kernel", d_conv}, {"ssm.state_size", d_state}, {"ssm.group_count", n_group},
            {"ssm.inner_size", d_inner}, {"ssm.time_step_rank", n_ssm_head}});
  w.set(a + "rope.scaling.finetuned", GgufValue::from_bool(false));  // no RoPE
  const int dense = n_expert == 0 ? 2 : 0;
  plan->kinds.assign((size_t)n_layer, 0);
  for (size_t i = 0; i < attn.size(); ++i) plan->kinds[i] = (attn[i] ? kGhAttn : kGhMamba) + dense;
  plan->n_head = n_head;
  plan->n_head_kv = n_kv;
  plan->n_group = n_group;
  return Status::ok();
}

}  // namespace

FamilySpec granitehybrid_spec() {
  constexpr KindMask kM = 1u << kGhMamba | 1u << kGhMambaDense, kA = 1u << kGhAttn | 1u << kGhAttnDense;
  constexpr KindMask kMoe = 1u << kGhMamba | 1u << kGhAttn, kDense = 1u << kGhMambaDense | 1u << kGhAttnDense;
  const Transform A = Transform::kSplitFirstHalf, B = Transform::kSplitSecondHalf;
  return FamilySpec{
      {"granitemoehybrid"},
      "granitehybrid",
      &granitehybrid_hparams,
      {
          {.hf = "model.embed_tokens.weight", .gguf = tn::kTokenEmbd},
          {.hf = "model.norm.weight", .gguf = tn::kOutputNorm},
          {.hf = "lm_head.weight", .gguf = tn::kOutput, .optional = true},
          {.hf = "model.layers.{i}.input_layernorm.weight", .gguf = tn::kAttnNorm},
          {.hf = "model.layers.{i}.mamba.in_proj.weight", .gguf = tn::kSsmIn, .kinds = kM},
          {.hf = "model.layers.{i}.mamba.conv1d.weight", .gguf = tn::kSsmConv1d, .kinds = kM,
           .transform = Transform::kSqueezeMiddle},
          {.hf = "model.layers.{i}.mamba.conv1d.bias", .gguf = tn::kSsmConv1dBias, .kinds = kM, .optional = true},
          {.hf = "model.layers.{i}.mamba.dt_bias", .gguf = tn::kSsmDtBias, .kinds = kM},
          {.hf = "model.layers.{i}.mamba.A_log", .gguf = tn::kSsmA, .kinds = kM, .transform = Transform::kNegExp,
           .reshape = Reshape::kAppendOne},
          {.hf = "model.layers.{i}.mamba.D", .gguf = tn::kSsmD, .kinds = kM, .reshape = Reshape::kAppendOne},
          {.hf = "model.layers.{i}.mamba.norm.weight", .gguf = tn::kSsmNorm, .kinds = kM,
           .reshape = Reshape::kGroups},
          {.hf = "model.layers.{i}.mamba.out_proj.weight", .gguf = tn::kSsmOut, .kinds = kM},
          {.hf = "model.layers.{i}.self_attn.q_proj.weight", .gguf = tn::kAttnQ, .kinds = kA,
           .transform = Transform::kRopePermuteQ},
          {.hf = "model.layers.{i}.self_attn.k_proj.weight", .gguf = tn::kAttnK, .kinds = kA,
           .transform = Transform::kRopePermuteK},
          {.hf = "model.layers.{i}.self_attn.v_proj.weight", .gguf = tn::kAttnV, .kinds = kA},
          {.hf = "model.layers.{i}.self_attn.o_proj.weight", .gguf = tn::kAttnOutput, .kinds = kA},
          {.hf = "model.layers.{i}.post_attention_layernorm.weight", .gguf = tn::kFfnNorm},
          {.hf = "model.layers.{i}.block_sparse_moe.router.layer.weight", .gguf = tn::kFfnGateInp,
           .kinds = kMoe, .keep_f32 = true},
          {.hf = "model.layers.{i}.block_sparse_moe.input_linear.weight", .gguf = tn::kFfnGateExps,
           .kinds = kMoe, .transform = A},
          {.hf = "model.layers.{i}.block_sparse_moe.input_linear.weight", .gguf = tn::kFfnUpExps,
           .kinds = kMoe, .transform = B},
          {.hf = "model.layers.{i}.block_sparse_moe.output_linear.weight", .gguf = tn::kFfnDownExps,
           .kinds = kMoe},
          {.hf = "model.layers.{i}.shared_mlp.input_linear.weight", .gguf = tn::kFfnGateShexp,
           .kinds = kMoe, .transform = A},
          {.hf = "model.layers.{i}.shared_mlp.input_linear.weight", .gguf = tn::kFfnUpShexp,
           .kinds = kMoe, .transform = B},
          {.hf = "model.layers.{i}.shared_mlp.output_linear.weight", .gguf = tn::kFfnDownShexp,
           .kinds = kMoe},
          {.hf = "model.layers.{i}.shared_mlp.input_linear.weight", .gguf = tn::kFfnGate,
           .kinds = kDense, .transform = A},
          {.hf = "model.layers.{i}.shared_mlp.input_linear.weight", .gguf = tn::kFfnUp,
           .kinds = kDense, .transform = B},
          {.hf = "model.layers.{i}.shared_mlp.output_linear.weight", .gguf = tn::kFfnDown,
           .kinds = kDense},
      }};
}

}  // namespace chimera::format::hf
