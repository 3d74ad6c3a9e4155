// Hugging Face family table: llama (LlamaForCausalLM; docs/CONVERT.md).
#include <algorithm>
#include <cmath>

#include "format/hf/hf_family_util.h"
#include "format/rope_factors.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

// ---- llama (Llama 2/3.x, TinyLlama, SmolLM, ... LlamaForCausalLM) ----------
// Keys as llama.cpp's convert_hf_to_gguf.py writes them; Q/K rows permuted
// from rotate-half to interleaved RoPE; Llama 3 RoPE scaling becomes the
// rope_freqs.weight tensor. docs/CONVERT.md lists every config key read.
Status llama_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, "hidden_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, "num_hidden_layers"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, "intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, "num_attention_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, get_int(c, "num_key_value_heads", n_head));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, get_int(c, "max_position_embeddings", 2048));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-6));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_vocab, require_int(c, "vocab_size"));
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  const bool explicit_head = c.contains("head_dim") && !c["head_dim"].is_null();
  CHIMERA_ASSIGN_OR_RETURN(int64_t head_dim, get_int(c, "head_dim", d / n_head));
  if (!explicit_head && d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if (head_dim % 2 != 0) return invalid_argument("the head size must be even (RoPE pairs)");
  if (auto it = c.find("attention_bias"); it != c.end() && it->is_boolean() && it->get<bool>())
    return unsupported("'attention_bias': true is not supported for llama");
  if (auto it = c.find("mlp_bias"); it != c.end() && it->is_boolean() && it->get<bool>())
    return unsupported("'mlp_bias': true is not supported for llama");
  if (auto it = c.find("hidden_act"); it != c.end() && !(it->is_string() && it->get<std::string>() == "silu"))
    return unsupported("'hidden_act' must be \"silu\" for llama");
  const std::string a = "llama.";
  set_u32s(w, "llama",
           {{"vocab_size", n_vocab}, {"context_length", ctx}, {"embedding_length", d}, {"block_count", n_layer},
            {"feed_forward_length", n_ff}, {"rope.dimension_count", head_dim}, {"attention.head_count", n_head},
            {"attention.head_count_kv", n_kv}});
  w.set(a + "rope.freq_base", GgufValue::from_f32((float)theta));
  w.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  if (explicit_head) set_u32s(w, "llama", {{"attention.key_length", head_dim}, {"attention.value_length", head_dim}});
  if (auto rs = c.find("rope_scaling"); rs != c.end() && !rs->is_null()) {
    if (!rs->is_object()) return invalid_argument("'rope_scaling' must be an object");
    std::string type = rs->value("rope_type", rs->value("type", std::string()));
    CHIMERA_ASSIGN_OR_RETURN(double factor, get_float(*rs, "factor", 1.0));
    if (type == "llama3") {
      CHIMERA_ASSIGN_OR_RETURN(double lo, get_float(*rs, "low_freq_factor", 1.0));
      CHIMERA_ASSIGN_OR_RETURN(double hi, get_float(*rs, "high_freq_factor", 4.0));
      CHIMERA_ASSIGN_OR_RETURN(int64_t orig, get_int(*rs, "original_max_position_embeddings", 8192));
      if (!(hi > lo)) return invalid_argument("rope_scaling: high_freq_factor must exceed low_freq_factor");
      plan->extra_f32.emplace_back(tn::kRopeFreqs,
                                   llama3_rope_factors(head_dim, theta, factor, lo, hi, (double)orig));
    } else if (type == "linear") {
      w.set(a + "rope.scaling.type", GgufValue::from_string("linear"));
      w.set(a + "rope.scaling.factor", GgufValue::from_f32((float)factor));
    } else {
      return unsupported("rope_scaling type '" + type + "' is not supported for llama (llama3, linear)");
    }
  }
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_head = n_head;
  plan->n_head_kv = n_kv;
  return Status::ok();
}

}  // namespace

FamilySpec llama_spec() {
  const Transform N = Transform::kNone;
  return FamilySpec{
      {"llama"},
      "llama",
      &llama_hparams,
      {
          {"model.embed_tokens.weight", tn::kTokenEmbd},
          {"model.norm.weight", tn::kOutputNorm},
          {"lm_head.weight", tn::kOutput, kAllKinds, N, false, /*optional=*/true},
          {"model.layers.{i}.input_layernorm.weight", tn::kAttnNorm},
          {"model.layers.{i}.self_attn.q_proj.weight", tn::kAttnQ, kAllKinds, Transform::kRopePermuteQ},
          {"model.layers.{i}.self_attn.k_proj.weight", tn::kAttnK, kAllKinds, Transform::kRopePermuteK},
          {"model.layers.{i}.self_attn.v_proj.weight", tn::kAttnV},
          {"model.layers.{i}.self_attn.o_proj.weight", tn::kAttnOutput},
          {"model.layers.{i}.self_attn.rotary_emb.inv_freq", nullptr, kAllKinds, N, false, true},
          {"model.layers.{i}.post_attention_layernorm.weight", tn::kFfnNorm},
          {"model.layers.{i}.mlp.gate_proj.weight", tn::kFfnGate},
          {"model.layers.{i}.mlp.up_proj.weight", tn::kFfnUp},
          {"model.layers.{i}.mlp.down_proj.weight", tn::kFfnDown},
      }};
}

}  // namespace chimera::format::hf
