// Hugging Face family table: phimoe (Phi-3.5-MoE, Phi-tiny-MoE; docs/CONVERT.md).
#include <algorithm>
#include <cmath>

#include "format/hf/hf_family_util.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

// ---- phimoe (PhiMoEForCausalLM: Phi-3.5-MoE, Phi-tiny-MoE) ------------------
// llama.cpp's PhiMoeModel (Phi3MiniModel keys + expert counts; experts stacked
// into ffn_*_exps), plus what it forgets: key_length / value_length when the
// config has an explicit head_dim (Phi-tiny-MoE: 16 heads of 128 in a 4096
// model), and rope.dimension_count = that head_dim (llama.cpp writes
// hidden / heads). LongRoPE: rope_factors_long / _short tensors and
// rope.scaling.attn_factor as llama.cpp, plus the config's short/long mscale.
Status phimoe_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, "hidden_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, "num_hidden_layers"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, "intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, "num_attention_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, require_int(c, "num_key_value_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_expert, require_int(c, "num_local_experts"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_used, require_int(c, "num_experts_per_tok"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, require_int(c, "max_position_embeddings"));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-5));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_ASSIGN_OR_RETURN(int64_t window, get_int(c, "sliding_window", 1));
  if (auto it = c.find("sliding_window"); it == c.end() || it->is_null()) window = 0;
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  if (n_used > n_expert) return invalid_argument("'num_experts_per_tok' exceeds 'num_local_experts'");
  if (n_used != 2) return unsupported("'num_experts_per_tok' must be 2 (sparsemixer routes top-2)");
  const bool explicit_head = c.contains("head_dim") && !c["head_dim"].is_null();
  CHIMERA_ASSIGN_OR_RETURN(int64_t head_dim, get_int(c, "head_dim", d / n_head));
  if (!explicit_head && d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if (head_dim % 2 != 0) return invalid_argument("the head size must be even (RoPE pairs)");
  if (auto it = c.find("partial_rotary_factor"); it != c.end() && !it->is_null() && !(it->is_number() && *it == 1.0))
    return unsupported("'partial_rotary_factor' other than 1 is not supported for phimoe");
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for phimoe");
  int64_t orig = ctx;
  const json* rs = nullptr;
  if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null()) {
    if (!it->is_object()) return invalid_argument("'rope_scaling' must be an object");
    rs = &*it;
  }
  const char* orig_key = "original_max_position_embeddings";
  if (c.contains(orig_key) && !c[orig_key].is_null()) {
    CHIMERA_ASSIGN_OR_RETURN(orig, get_int(c, orig_key, ctx));
  } else if (rs && rs->contains(orig_key)) {
    CHIMERA_ASSIGN_OR_RETURN(orig, get_int(*rs, orig_key, ctx));
  }
  const std::string a = "phimoe.";
  set_u32s(w, "phimoe",
           {{"context_length", ctx}, {"rope.scaling.original_context_length", orig}, {"embedding_length", d},
            {"feed_forward_length", n_ff}, {"block_count", n_layer}, {"attention.head_count", n_head},
            {"attention.head_count_kv", n_kv}});
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  set_u32s(w, "phimoe", {{"rope.dimension_count", head_dim}});
  w.set(a + "rope.freq_base", GgufValue::from_f32((float)theta));
  set_u32s(w, "phimoe", {{"attention.sliding_window", window}, {"expert_used_count", n_used}, {"expert_count", n_expert}});
  if (explicit_head) set_u32s(w, "phimoe", {{"attention.key_length", head_dim}, {"attention.value_length", head_dim}});
  if (rs) {
    const std::string type = rs->value("rope_type", rs->value("type", std::string()));
    if (type != "longrope" && type != "su")
      return unsupported("rope_scaling type '" + type + "' is not supported for phimoe (longrope)");
    std::vector<float> lf, sf;
    for (auto [key, dst] : {std::pair{"long_factor", &lf}, std::pair{"short_factor", &sf}}) {
      auto it = rs->find(key);
      if (it == rs->end() || !it->is_array()) return not_found(std::string("missing config key 'rope_scaling.") + key + "'");
      for (const json& x : *it) {
        if (!x.is_number()) return invalid_argument(std::string("'rope_scaling.") + key + "' must hold numbers");
        dst->push_back(x.get<float>());
      }
      if ((int64_t)dst->size() != head_dim / 2)
        return invalid_argument(std::string("'rope_scaling.") + key + "' must hold head_dim / 2 = " +
                                std::to_string(head_dim / 2) + " factors");
    }
    const double scale = (double)ctx / (double)orig;
    const double attn_factor = scale > 1.0 ? std::sqrt(1 + std::log(scale) / std::log((double)orig)) : 1.0;
    w.set(a + "rope.scaling.attn_factor", GgufValue::from_f32((float)attn_factor));
    for (auto [key, gk] : {std::pair{"short_mscale", "rope.scaling.short_mscale"}, std::pair{"long_mscale", "rope.scaling.long_mscale"}}) {
      auto it = rs->find(key);
      if (it == rs->end() || it->is_null()) continue;
      if (!it->is_number()) return invalid_argument(std::string("'rope_scaling.") + key + "' must be a number");
      w.set(a + gk, GgufValue::from_f32(it->get<float>()));
    }
    plan->extra_f32.emplace_back(tn::kRopeFactorsLong, std::move(lf));
    plan->extra_f32.emplace_back(tn::kRopeFactorsShort, std::move(sf));
  }
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_expert = n_expert;
  return Status::ok();
}

}  // namespace

FamilySpec phimoe_spec() {
  return FamilySpec{
      {"phimoe"},
      "phimoe",
      &phimoe_hparams,
      {
          {.hf = "model.embed_tokens.weight", .gguf = tn::kTokenEmbd},
          {.hf = "model.norm.weight", .gguf = tn::kOutputNorm},
          {.hf = "model.norm.bias", .gguf = tn::kOutputNormBias},
          {.hf = "lm_head.weight", .gguf = tn::kOutput, .optional = true},
          {.hf = "lm_head.bias", .gguf = tn::kOutputBias, .optional = true},
          {.hf = "model.layers.{i}.input_layernorm.weight", .gguf = tn::kAttnNorm},
          {.hf = "model.layers.{i}.input_layernorm.bias", .gguf = tn::kAttnNormBias},
          {.hf = "model.layers.{i}.self_attn.q_proj.weight", .gguf = tn::kAttnQ},
          {.hf = "model.layers.{i}.self_attn.q_proj.bias", .gguf = tn::kAttnQBias, .optional = true},
          {.hf = "model.layers.{i}.self_attn.k_proj.weight", .gguf = tn::kAttnK},
          {.hf = "model.layers.{i}.self_attn.k_proj.bias", .gguf = tn::kAttnKBias, .optional = true},
          {.hf = "model.layers.{i}.self_attn.v_proj.weight", .gguf = tn::kAttnV},
          {.hf = "model.layers.{i}.self_attn.v_proj.bias", .gguf = tn::kAttnVBias, .optional = true},
          {.hf = "model.layers.{i}.self_attn.o_proj.weight", .gguf = tn::kAttnOutput},
          {.hf = "model.layers.{i}.self_attn.o_proj.bias", .gguf = tn::kAttnOutputBias, .optional = true},
          {.hf = "model.layers.{i}.self_attn.rotary_emb.inv_freq", .gguf = nullptr, .optional = true},
          {.hf = "model.layers.{i}.post_attention_layernorm.weight", .gguf = tn::kFfnNorm},
          {.hf = "model.layers.{i}.post_attention_layernorm.bias", .gguf = tn::kFfnNormBias},
          {.hf = "model.layers.{i}.block_sparse_moe.gate.weight", .gguf = tn::kFfnGateInp, .keep_f32 = true},
          {.hf = "model.layers.{i}.block_sparse_moe.experts.{e}.w1.weight", .gguf = tn::kFfnGateExps},
          {.hf = "model.layers.{i}.block_sparse_moe.experts.{e}.w3.weight", .gguf = tn::kFfnUpExps},
          {.hf = "model.layers.{i}.block_sparse_moe.experts.{e}.w2.weight", .gguf = tn::kFfnDownExps},
      }};
}

}  // namespace chimera::format::hf
