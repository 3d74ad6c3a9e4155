// Plan builders for the attention-only families of `synth` beyond llama: arch
// "phimoe" (LayerNorm with bias, biased attention, top-k MoE), "llada" (llama
// block, non-causal, mask token) and "bitnet" (sub-norms, squared-ReLU FFN).
// Keys follow llama.cpp's converter as the golden fixtures (tiny-phimoe-hf /
// tiny-llada / tiny-bitnet-TQ2_0) show them; the tensors are each arch's tensor
// table (the loader's, models/<family>_tensors.cpp).
#include <cmath>

#include "models/synth/synth_families.h"

namespace chimera::models::synth {

using format::GgufValue;

namespace {
GgufValue u32(int64_t v) { return GgufValue::from_u32((uint32_t)v); }
GgufValue f32(double v) { return GgufValue::from_f32((float)v); }

// Phi-3's added tokens at ids 32000-32010 (added_tokens.json of the Phi-3 / Phi-3.5 family),
// control tokens, with eos <|endoftext|> as the converter writes it. llama.cpp looks
// "<|endoftext|>" up by name for every model whose general.name contains "phi-3" and fails
// to load ("unordered_map::at") when it is missing. Smaller test vocabularies keep the plain ones.
void add_phi3_added_tokens(SynthPlan& p, int64_t n_vocab) {
  static const char* const kAdded[] = {"<|endoftext|>", "<|assistant|>",    "<|placeholder1|>", "<|placeholder2|>",
                                       "<|placeholder3|>", "<|placeholder4|>", "<|system|>",      "<|end|>",
                                       "<|placeholder5|>", "<|placeholder6|>", "<|user|>"};
  constexpr int64_t kFirst = 32000, kCount = (int64_t)(sizeof kAdded / sizeof kAdded[0]);
  if (n_vocab < kFirst + kCount) return;
  for (auto& [key, v] : p.metadata) {
    for (int64_t i = 0; i < kCount; ++i) {
      const size_t id = (size_t)(kFirst + i);
      if (key == "tokenizer.ggml.tokens") v.arr[id] = GgufValue::from_string(kAdded[i]);
      if (key == "tokenizer.ggml.scores") v.arr[id] = GgufValue::from_f32(0.0f);
      if (key == "tokenizer.ggml.token_type") v.arr[id] = GgufValue::from_i32(3);
    }
  }
  p.set("tokenizer.ggml.eos_token_id", u32(kFirst));
}

// The llama-style hyper-parameters (keys under prefix `a`) of a family whose
// config has n_ctx, n_embd, n_ff, n_head, n_head_kv, rms_eps and rope_theta.
template <class Cfg>
void set_llama_hparams(SynthPlan& p, const std::string& a, const Cfg& cfg, int64_t n_layer, int64_t n_vocab) {
  p.set(a + "context_length", u32(cfg.n_ctx));
  p.set(a + "embedding_length", u32(cfg.n_embd));
  p.set(a + "block_count", u32(n_layer));
  p.set(a + "feed_forward_length", u32(cfg.n_ff));
  p.set(a + "attention.head_count", u32(cfg.n_head));
  p.set(a + "attention.head_count_kv", u32(cfg.n_head_kv));
  p.set(a + "attention.layer_norm_rms_epsilon", f32(cfg.rms_eps));
  p.set(a + "rope.dimension_count", u32(cfg.n_embd / cfg.n_head));
  p.set(a + "rope.freq_base", f32(cfg.rope_theta));
  p.set(a + "vocab_size", u32(n_vocab));
}

// The tensor-table sizes of a llama-style block (head_dim = n_embd / n_head).
template <class Cfg>
TableParams llama_block_sizes(const Cfg& cfg, int64_t n_layer, int64_t n_vocab) {
  TableParams tp(n_layer);
  const int64_t head_dim = cfg.n_embd / cfg.n_head;
  tp.set("n_embd", cfg.n_embd), tp.set("n_vocab", n_vocab), tp.set("n_ff", cfg.n_ff);
  tp.set("n_head", cfg.n_head), tp.set("n_head_kv", cfg.n_head_kv), tp.set("head_dim", head_dim);
  tp.set("head_dim_v", head_dim);
  return tp;
}

}  // namespace

Result<SynthPlan> build_phimoe_plan(const PhiMoeSynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const int64_t n_embd = cfg.n_embd;
  const std::string a = "phimoe.";
  SynthPlan p;
  set_general_header(p, "phimoe", cfg.display_name);
  p.set(a + "context_length", u32(cfg.n_ctx));
  p.set(a + "rope.scaling.original_context_length", u32(cfg.n_ctx_orig));
  p.set(a + "embedding_length", u32(n_embd));
  p.set(a + "block_count", u32(n_layer));
  p.set(a + "feed_forward_length", u32(cfg.n_ff));
  p.set(a + "expert_count", u32(cfg.n_expert));
  p.set(a + "expert_used_count", u32(cfg.n_expert_used));
  p.set(a + "attention.head_count", u32(cfg.n_head));
  p.set(a + "attention.head_count_kv", u32(cfg.n_head_kv));
  p.set(a + "attention.layer_norm_rms_epsilon", f32(cfg.rms_eps));
  if (cfg.head_dim * cfg.n_head != n_embd) {
    p.set(a + "attention.key_length", u32(cfg.head_dim));
    p.set(a + "attention.value_length", u32(cfg.head_dim));
  }
  p.set(a + "rope.dimension_count", u32(cfg.head_dim));
  p.set(a + "rope.freq_base", f32(cfg.rope_theta));
  p.set(a + "vocab_size", u32(n_vocab));
  if (cfg.sliding_window > 0) p.set(a + "attention.sliding_window", u32(cfg.sliding_window));
  CHIMERA_RETURN_IF_ERROR(add_spm_vocab(p, n_vocab));
  add_phi3_added_tokens(p, n_vocab);

  if (cfg.longrope) {
    // Shapes and the attn_factor formula are the converter's; the factor values are placeholders
    // (1.0: plain RoPE), which do not change the amount of work.
    const double s = (double)cfg.n_ctx / (double)cfg.n_ctx_orig;
    p.set(a + "rope.scaling.attn_factor", f32(s > 1.0 ? std::sqrt(1.0 + std::log(s) / std::log((double)cfg.n_ctx_orig)) : 1.0));
  }
  TableParams tp(n_layer);
  tp.set("n_embd", n_embd), tp.set("n_vocab", n_vocab), tp.set("n_ff", cfg.n_ff), tp.set("n_expert", cfg.n_expert);
  tp.set("n_head", cfg.n_head), tp.set("n_head_kv", cfg.n_head_kv), tp.set("head_dim", cfg.head_dim);
  tp.set("head_dim_v", cfg.head_dim), tp.set("n_rot", cfg.head_dim);
  std::vector<std::string_view> optional = {tn::kAttnQBias, tn::kAttnKBias, tn::kAttnVBias,
                                            tn::kAttnOutputBias, tn::kOutput};
  if (cfg.longrope) optional.insert(optional.end(), {tn::kRopeFactorsLong, tn::kRopeFactorsShort});
  if (cfg.output_bias) optional.push_back(tn::kOutputBias);
  CHIMERA_RETURN_IF_ERROR(add_table_tensors(p, "phimoe", tp, optional));
  return p;
}

Result<SynthPlan> build_llada_plan(const LladaSynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const std::string a = "llada.";
  SynthPlan p;
  set_general_header(p, "llada", cfg.display_name);
  set_llama_hparams(p, a, cfg, n_layer, n_vocab);
  p.set(a + "attention.causal", GgufValue::from_bool(false));
  p.set("diffusion.shift_logits", GgufValue::from_bool(false));
  CHIMERA_RETURN_IF_ERROR(add_spm_vocab(p, n_vocab));
  // The real mask id when it fits; with a smaller test --vocab, the last token.
  p.set("tokenizer.ggml.mask_token_id", u32(cfg.mask_token_id < n_vocab ? cfg.mask_token_id : n_vocab - 1));

  CHIMERA_RETURN_IF_ERROR(add_table_tensors(p, "llada", llama_block_sizes(cfg, n_layer, n_vocab), {tn::kOutput}));
  return p;
}

Result<SynthPlan> build_bitnet_plan(const BitnetSynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const std::string a = "bitnet.";
  SynthPlan p;
  set_general_header(p, "bitnet", cfg.display_name);
  set_llama_hparams(p, a, cfg, n_layer, n_vocab);
  // chimera's switch for the 2B-4T squared-ReLU FFN under arch "bitnet" (models/bitnet.cpp).
  if (cfg.relu2) p.set(a + "ffn_activation", GgufValue::from_string("relu2"));
  CHIMERA_RETURN_IF_ERROR(add_spm_vocab(p, n_vocab));

  CHIMERA_RETURN_IF_ERROR(add_table_tensors(p, "bitnet", llama_block_sizes(cfg, n_layer, n_vocab)));  // tied head
  return p;
}

}  // namespace chimera::models::synth
