// Hugging Face family table: llada (LLaDAModelLM: GSAI-ML/LLaDA-8B-Base /
// -Instruct; docs/CONVERT.md). LLaDA's config and tensor names are OLMo's
// (d_model, n_heads, mlp_hidden_size, model.transformer.blocks.{i}.*); the
// block is Llama's without the causal mask. Keys as llama.cpp's LLaDAModel
// writes them: the base text-model keys, vocab_size, rope.dimension_count,
// attention.causal = false, diffusion.shift_logits = false, and
// tokenizer.ggml.add_bos_token forced true; Q/K rows permuted as for llama
// (llama.cpp runs arch llada with interleaved RoPE). The mask token id comes
// from config.json's mask_token_id (the generic tokenizer step writes it, as
// llama.cpp's SpecialVocab does); chimera's loader needs it, so it is required.
#include <string>

#include "format/hf/hf_family_util.h"

namespace chimera::format::hf {
namespace {

using nlohmann::json;

// A string switch the converter supports only at one value.
Status require_string(const json& c, const char* key, const char* value) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return Status::ok();
  if (!it->is_string() || it->get<std::string>() != value)
    return unsupported(std::string("'") + key + "' must be \"" + value + "\" for llada");
  return Status::ok();
}

Status llada_hparams(const json& c, GgufWriter& w, LayerPlan* plan) {
  CHIMERA_ASSIGN_OR_RETURN(int64_t d, require_int(c, pick(c, {"d_model", "hidden_size"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_layer, require_int(c, pick(c, {"n_layers", "num_hidden_layers"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_ff, require_int(c, pick(c, {"mlp_hidden_size", "intermediate_size"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_head, require_int(c, pick(c, {"n_heads", "num_attention_heads"})));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_kv, get_int(c, pick(c, {"n_kv_heads", "num_key_value_heads"}), n_head));
  CHIMERA_ASSIGN_OR_RETURN(int64_t ctx, get_int(c, "max_sequence_length", 4096));
  CHIMERA_ASSIGN_OR_RETURN(double eps, get_float(c, "rms_norm_eps", 1e-5));
  CHIMERA_ASSIGN_OR_RETURN(double theta, get_float(c, "rope_theta", 10000.0));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_vocab, require_int(c, "vocab_size"));
  CHIMERA_ASSIGN_OR_RETURN(int64_t n_emb_rows, get_int(c, "embedding_size", n_vocab));
  CHIMERA_ASSIGN_OR_RETURN(int64_t mask, require_int(c, "mask_token_id"));
  if (n_emb_rows != n_vocab)
    return unsupported("'embedding_size' " + std::to_string(n_emb_rows) + " differs from 'vocab_size' " +
                       std::to_string(n_vocab) + " (a padded embedding table is not supported for llada)");
  if (mask >= n_vocab) return invalid_argument("'mask_token_id' " + std::to_string(mask) + " is outside the vocabulary");
  if (n_head % n_kv != 0) return invalid_argument("n_heads must be a multiple of n_kv_heads");
  if (d % n_head != 0) return invalid_argument("d_model must be a multiple of n_heads");
  if ((d / n_head) % 2 != 0) return invalid_argument("the head size must be even (RoPE pairs)");
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "include_bias", false, "llada"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "include_qkv_bias", false, "llada"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "alibi", false, "llada"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "rope", true, "llada"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "input_emb_norm", false, "llada"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "attention_layer_norm", false, "llada"));
  CHIMERA_RETURN_IF_ERROR(refuse_bool(c, "scale_logits", false, "llada"));
  CHIMERA_RETURN_IF_ERROR(require_string(c, "block_type", "llama"));
  CHIMERA_RETURN_IF_ERROR(require_string(c, "layer_norm_type", "rms"));
  CHIMERA_RETURN_IF_ERROR(require_string(c, "activation_type", "silu"));
  bool tied = false;
  if (auto it = c.find("weight_tying"); it != c.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid_argument("'weight_tying' must be true or false");
    tied = it->get<bool>();
  }
  // llama.cpp's TextModel keys, then LLaDAModel's.
  set_u32s(w, "llada",
           {{"block_count", n_layer}, {"context_length", ctx}, {"embedding_length", d}, {"feed_forward_length", n_ff},
            {"attention.head_count", n_head}, {"attention.head_count_kv", n_kv}});
  w.set("llada.rope.freq_base", GgufValue::from_f32((float)theta));
  w.set("llada.attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)eps));
  set_u32s(w, "llada", {{"vocab_size", n_vocab}, {"rope.dimension_count", d / n_head}});
  w.set("llada.attention.causal", GgufValue::from_bool(false));
  w.set("diffusion.shift_logits", GgufValue::from_bool(false));
  plan->kinds.assign((size_t)n_layer, 0);
  plan->n_head = n_head;
  plan->n_head_kv = n_kv;
  if (!tied) plan->required.push_back("model.transformer.ff_out.weight");
  return Status::ok();
}

Status llada_after_tokenizer(const json&, GgufWriter& w) {
  w.set("tokenizer.ggml.add_bos_token", GgufValue::from_bool(true));  // LLaDAModel.set_vocab
  return Status::ok();
}

}  // namespace

FamilySpec llada_spec() {
  const Transform N = Transform::kNone;
  FamilySpec f{{"llada"},
               "llada",
               &llada_hparams,
               {
                   {"model.transformer.wte.weight", tn::kTokenEmbd},
                   {"model.transformer.ln_f.weight", tn::kOutputNorm},
                   {"model.transformer.ff_out.weight", tn::kOutput, kAllKinds, N, false, /*optional=*/true},
                   {"model.transformer.blocks.{i}.attn_norm.weight", tn::kAttnNorm},
                   {"model.transformer.blocks.{i}.q_proj.weight", tn::kAttnQ, kAllKinds,
                    Transform::kRopePermuteQ},
                   {"model.transformer.blocks.{i}.k_proj.weight", tn::kAttnK, kAllKinds,
                    Transform::kRopePermuteK},
                   {"model.transformer.blocks.{i}.v_proj.weight", tn::kAttnV},
                   {"model.transformer.blocks.{i}.attn_out.weight", tn::kAttnOutput},
                   {"model.transformer.blocks.{i}.ff_norm.weight", tn::kFfnNorm},
                   {"model.transformer.blocks.{i}.ff_proj.weight", tn::kFfnGate},
                   {"model.transformer.blocks.{i}.up_proj.weight", tn::kFfnUp},
                   {"model.transformer.blocks.{i}.ff_out.weight", tn::kFfnDown},
               }};
  f.after_tokenizer = &llada_after_tokenizer;
  return f;
}

}  // namespace chimera::format::hf
