// Hugging Face family table: dream (DreamModel: Dream-org/Dream-v0-Base-7B /
// -Instruct-7B; docs/CONVERT.md). Dream is Qwen2.5's block (q/k/v biases,
// NEOX RoPE, so no Q/K permutation) with bidirectional attention and logits
// shifted by one. Keys as llama.cpp's DreamModel writes them: the base
// text-model keys plus attention.causal = false and the mask token id from
// config.json's mask_token_id (written by the generic tokenizer step; required
// here because chimera's loader needs it). llama.cpp writes neither
// diffusion.shift_logits nor rope.dimension_count for dream: its loader (and
// chimera's) default them to true and the head size.
#include <string>

#include "format/hf/hf_family_util.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

Status dream_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, "hidden_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, "num_hidden_layers"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, "intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, "num_attention_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, get_int(c, "num_key_value_heads", n_head));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, get_int(c, "max_position_embeddings", 131072));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-6));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_vocab, require_int(c, "vocab_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t mask, require_int(c, "mask_token_id"));
  if (mask >= n_vocab) return invalid_argument("'mask_token_id' " + std::to_string(mask) + " is outside the vocabulary");
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  if (d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null())
    return unsupported("'rope_scaling' is not supported for dream (Dream-7B has none)");
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "use_sliding_window", false, "dream"));
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for dream");
  bool tied = false;
  if (auto it = c.find("tie_word_embeddings"); it != c.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid_argument("'tie_word_embeddings' must be true or false");
    tied = it->get<bool>();
  }
  set_u32s(w, "dream",
           {{"block_count", n_layer}, {"context_length", ctx}, {"embedding_length", d}, {"feed_forward_length", n_ff},
            {"attention.head_count", n_head}, {"attention.head_count_kv", n_kv}});
  w.set("dream.rope.freq_base", GgufValue::from_f32((float)theta));
  w.set("dream.attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  if (auto it = c.find("head_dim"); it != c.end() && !it->is_null()) {
    CHIMERA_ASSIGN_OR_RETURN(int64_t hd, get_int(c, "head_dim", 0));
    set_u32s(w, "dream", {{"attention.key_length", hd}, {"attention.value_length", hd}});
  }
  w.set("dream.attention.causal", GgufValue::from_bool(false));
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_head = n_head;
  plan->n_head_kv = n_kv;
  if (!tied) plan->required.push_back("lm_head.weight");
  return Status::ok();
}

}  // namespace

FamilySpec dream_spec() {
  const Transform N = Transform::kNone;
  return FamilySpec{
      {"Dream", "dream"},
      "dream",
      &dream_hparams,
      {
          {"model.embed_tokens.weight", tn::kTokenEmbd},
          {"model.norm.weight", tn::kOutputNorm},
          {"lm_head.weight", tn::kOutput, kAllKinds, N, false, /*optional=*/true},
          {"model.layers.{i}.input_layernorm.weight", tn::kAttnNorm},
          {"model.layers.{i}.self_attn.q_proj.weight", tn::kAttnQ},
          {"model.layers.{i}.self_attn.q_proj.bias", tn::kAttnQBias},
          {"model.layers.{i}.self_attn.k_proj.weight", tn::kAttnK},
          {"model.layers.{i}.self_attn.k_proj.bias", tn::kAttnKBias},
          {"model.layers.{i}.self_attn.v_proj.weight", tn::kAttnV},
          {"model.layers.{i}.self_attn.v_proj.bias", tn::kAttnVBias},
          {"model.layers.{i}.self_attn.o_proj.weight", tn::kAttnOutput},
          {"model.layers.{i}.self_attn.rotary_emb.inv_freq", nullptr, kAllKinds, N, false, true},
          {"model.layers.{i}.post_attention_layernorm.weight", tn::kFfnNorm},
          {"model.layers.{i}.mlp.gate_proj.weight", tn::kFfnGate},
          {"model.layers.{i}.mlp.up_proj.weight", tn::kFfnUp},
          {"model.layers.{i}.mlp.down_proj.weight", tn::kFfnDown},
      }};
}

}  // namespace chimera::format::hf
