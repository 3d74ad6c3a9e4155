// Llama-family plan builder for `synth`. Keys, value types, key order and tensor
// names follow what llama.cpp's convert_hf_to_gguf.py writes for arch "llama":
// llama.* hyper-parameters as UINT32/FLOAT32, rope_freqs.weight (F32, head_dim/2)
// for llama3 rope scaling, no output.weight when embeddings are tied.
#include "models/synth/synth_families.h"

namespace chimera::models::synth {

using format::GgufValue;

Result<SynthPlan> build_llama_plan(const LlamaSynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const int64_t n_embd = cfg.n_embd;
  const int64_t n_q = cfg.n_head * cfg.head_dim;
  const int64_t n_kv = cfg.n_head_kv * cfg.head_dim;
  const std::string a = "llama.";
  auto u32 = [](int64_t v) { return GgufValue::from_u32((uint32_t)v); };

  SynthPlan p;
  p.set("general.architecture", GgufValue::from_string("llama"));
  p.set("general.type", GgufValue::from_string("model"));
  p.set("general.name", GgufValue::from_string(std::string(cfg.display_name)));
  p.set(a + "block_count", u32(n_layer));
  p.set(a + "context_length", u32(cfg.n_ctx));
  p.set(a + "embedding_length", u32(n_embd));
  p.set(a + "feed_forward_length", u32(cfg.n_ff));
  p.set(a + "attention.head_count", u32(cfg.n_head));
  p.set(a + "attention.head_count_kv", u32(cfg.n_head_kv));
  p.set(a + "rope.freq_base", GgufValue::from_f32((float)cfg.rope_theta));
  p.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32((float)cfg.rms_eps));
  p.set(a + "attention.key_length", u32(cfg.head_dim));
  p.set(a + "attention.value_length", u32(cfg.head_dim));
  p.set("general.file_type", u32(0));  // set by apply_type; placed where the converter puts it
  p.set(a + "vocab_size", u32(n_vocab));
  p.set(a + "rope.dimension_count", u32(cfg.head_dim));
  CHIMERA_RETURN_IF_ERROR(add_spm_vocab(p, n_vocab));

  const SynthInit w = SynthInit::normal(0.02f);
  const SynthInit ones = SynthInit::constant(1.0f);
  p.tensors.push_back({"token_embd.weight", {n_embd, n_vocab}, w});
  if (cfg.llama3_rope) {
    const auto& r = *cfg.llama3_rope;
    p.tensors.push_back({"rope_freqs.weight", {cfg.head_dim / 2},
                         SynthInit::exact(format::llama3_rope_factors(cfg.head_dim, cfg.rope_theta, r.factor,
                                                              r.low_freq_factor, r.high_freq_factor,
                                                              r.original_context))});
  }
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.tensors.push_back({b + "attn_norm.weight", {n_embd}, ones});
    p.tensors.push_back({b + "attn_q.weight", {n_embd, n_q}, w});
    p.tensors.push_back({b + "attn_k.weight", {n_embd, n_kv}, w});
    p.tensors.push_back({b + "attn_v.weight", {n_embd, n_kv}, w});
    p.tensors.push_back({b + "attn_output.weight", {n_q, n_embd}, w});
    p.tensors.push_back({b + "ffn_norm.weight", {n_embd}, ones});
    p.tensors.push_back({b + "ffn_gate.weight", {n_embd, cfg.n_ff}, w});
    p.tensors.push_back({b + "ffn_up.weight", {n_embd, cfg.n_ff}, w});
    p.tensors.push_back({b + "ffn_down.weight", {cfg.n_ff, n_embd}, w});
  }
  p.tensors.push_back({"output_norm.weight", {n_embd}, ones});
  if (!cfg.tied_embeddings) p.tensors.push_back({"output.weight", {n_embd, n_vocab}, w});
  return p;
}

}  // namespace chimera::models::synth
