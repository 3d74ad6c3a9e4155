// Hugging Face family table: bitnet (BitNetForCausalLM, model_type "bitnet":
// microsoft/bitnet-b1.58-2B-4T and its -bf16 master weights;
// docs/CONVERT.md). Arch "bitnet" with the keys llama.cpp's BitnetModel
// writes (the base text-model keys plus rope.scaling.type = linear, factor 1);
// no Q/K permutation (llama.cpp runs bitnet with NEOX RoPE). Every BitLinear
// weight (q, k, v, o, gate, up, down) goes through Transform::kBitnetTernary:
// BF16 masters are ternarized per tensor as llama.cpp's weight_quant does, the
// packed U8 weights of the deployment checkpoint are unpacked with their
// weight_scale (quantization_config.linear_class: "bitlinear" divides, as
// llama.cpp's dequant_bitnet; "autobitlinear" multiplies). `--type tq2_0`
// then stores the ternary weights losslessly. hidden_act "relu2" (2B-4T)
// writes chimera's bitnet.ffn_activation = "relu2": llama.cpp's bitnet graph
// has no activation key and always uses SiLU.
#include <string>

#include "format/hf/hf_family_util.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

Status bitnet_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, "hidden_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, "num_hidden_layers"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, "intermediate_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, "num_attention_heads"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, get_int(c, "num_key_value_heads", n_head));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, get_int(c, "max_position_embeddings", 4096));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-5));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_RETURN_IF_ERROR(require_int(c, "vocab_size").status());
  if (n_head % n_kv != 0) return invalid_argument("num_attention_heads must be a multiple of num_key_value_heads");
  if (d % n_head != 0) return invalid_argument("hidden_size must be a multiple of num_attention_heads");
  if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null())
    return unsupported("'rope_scaling' is not supported for bitnet (BitNet b1.58 2B-4T has none)");
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "attention_bias", false, "bitnet"));
  std::string act = "silu";
  if (auto it = c.find("hidden_act"); it != c.end() && !it->is_null()) {
    if (!it->is_string()) return invalid_argument("'hidden_act' must be a string");
    act = it->get<std::string>();
  }
  if (act != "silu" && act != "relu2")
    return unsupported("'hidden_act' \"" + act + "\" is not supported for bitnet (silu, relu2)");
  if (auto q = c.find("quantization_config"); q != c.end() && !q->is_null()) {
    if (!q->is_object()) return invalid_argument("'quantization_config' must be an object");
    const std::string method = q->value("quant_method", std::string());
    if (method != "bitnet")
      return unsupported("quantization_config.quant_method '" + method + "' is not supported for bitnet (bitnet)");
    const std::string cls = q->value("linear_class", std::string("bitlinear"));
    if (cls != "bitlinear" && cls != "autobitlinear")
      return unsupported("quantization_config.linear_class '" + cls + "' is not supported (bitlinear, autobitlinear)");
    plan->bitnet_scale_multiplies = cls == "autobitlinear";
    if (q->value("use_rms_norm", false))
      return unsupported("quantization_config.use_rms_norm: true is not supported for bitnet");
  }
  bool tied = true;  // BitNetConfig's default; 2B-4T ties
  if (auto it = c.find("tie_word_embeddings"); it != c.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid_argument("'tie_word_embeddings' must be true or false");
    tied = it->get<bool>();
  }
  set_u32s(w, "bitnet",
           {{"block_count", n_layer}, {"context_length", ctx}, {"embedding_length", d}, {"feed_forward_length", n_ff},
            {"attention.head_count", n_head}, {"attention.head_count_kv", n_kv}});
  w.set("bitnet.rope.freq_base", GgufValue::from_f32((float)theta));
  w.set("bitnet.attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  if (auto it = c.find("head_dim"); it != c.end() && !it->is_null()) {
    CHIMERA_ASSIGN_OR_RETURN(int64_t hd, get_int(c, "head_dim", 0));
    if (hd * n_head != d) return unsupported("'head_dim' must equal hidden_size / num_attention_heads for bitnet");
    set_u32s(w, "bitnet", {{"attention.key_length", hd}, {"attention.value_length", hd}});
  }
  w.set("bitnet.rope.scaling.type", GgufValue::from_string("linear"));
  w.set("bitnet.rope.scaling.factor", GgufValue::from_f32(1.0f));
  if (act == "relu2") w.set("bitnet.ffn_activation", GgufValue::from_string("relu2"));
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_head = n_head;
  plan->n_head_kv = n_kv;
  if (!tied) plan->required.push_back("lm_head.weight");
  return Status::ok();
}

}  // namespace

FamilySpec bitnet_spec() {
  const Transform N = Transform::kNone, T = Transform::kBitnetTernary;
  // A BitLinear weight and the weight_scale of its packed form.
  auto lin = [T](const char* hf, const char* gguf, const char* scale) {
    TensorRule r{hf, gguf, kAllKinds, T};
    r.scale = scale;
    return r;
  };
  auto scale = [N](const char* hf) { return TensorRule{hf, nullptr, kAllKinds, N, false, /*optional=*/true}; };
  return FamilySpec{
      {"bitnet"},
      "bitnet",
      &bitnet_hparams,
      {
          {"model.embed_tokens.weight", tn::kTokenEmbd},
          {"model.norm.weight", tn::kOutputNorm},
          {"lm_head.weight", tn::kOutput, kAllKinds, N, false, /*optional=*/true},
          {"model.layers.{i}.input_layernorm.weight", tn::kAttnNorm},
          lin("model.layers.{i}.self_attn.q_proj.weight", tn::kAttnQ,
              "model.layers.{i}.self_attn.q_proj.weight_scale"),
          scale("model.layers.{i}.self_attn.q_proj.weight_scale"),
          lin("model.layers.{i}.self_attn.k_proj.weight", tn::kAttnK,
              "model.layers.{i}.self_attn.k_proj.weight_scale"),
          scale("model.layers.{i}.self_attn.k_proj.weight_scale"),
          lin("model.layers.{i}.self_attn.v_proj.weight", tn::kAttnV,
              "model.layers.{i}.self_attn.v_proj.weight_scale"),
          scale("model.layers.{i}.self_attn.v_proj.weight_scale"),
          lin("model.layers.{i}.self_attn.o_proj.weight", tn::kAttnOutput,
              "model.layers.{i}.self_attn.o_proj.weight_scale"),
          scale("model.layers.{i}.self_attn.o_proj.weight_scale"),
          {"model.layers.{i}.self_attn.attn_sub_norm.weight", tn::kAttnSubNorm},
          {"model.layers.{i}.self_attn.rotary_emb.inv_freq", nullptr, kAllKinds, N, false, true},
          {"model.layers.{i}.post_attention_layernorm.weight", tn::kFfnNorm},
          lin("model.layers.{i}.mlp.gate_proj.weight", tn::kFfnGate,
              "model.layers.{i}.mlp.gate_proj.weight_scale"),
          scale("model.layers.{i}.mlp.gate_proj.weight_scale"),
          lin("model.layers.{i}.mlp.up_proj.weight", tn::kFfnUp,
              "model.layers.{i}.mlp.up_proj.weight_scale"),
          scale("model.layers.{i}.mlp.up_proj.weight_scale"),
          lin("model.layers.{i}.mlp.down_proj.weight", tn::kFfnDown,
              "model.layers.{i}.mlp.down_proj.weight_scale"),
          scale("model.layers.{i}.mlp.down_proj.weight_scale"),
          {"model.layers.{i}.mlp.ffn_sub_norm.weight", tn::kFfnSubNorm},
      }};
}

}  // namespace chimera::format::hf
