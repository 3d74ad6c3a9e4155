// Llama-family plan builder for `synth`. Keys, value types and key order follow
// what llama.cpp's convert_hf_to_gguf.py writes for arch "llama": llama.*
// hyper-parameters as UINT32/FLOAT32. The tensors are llama's tensor table (the
// loader's): rope_freqs.weight (F32, head_dim/2) for llama3 rope scaling, no
// output.weight when embeddings are tied.
#include "models/synth/synth_families.h"

namespace chimera::models::synth {

using format::GgufValue;

Result<SynthPlan> build_llama_plan(const LlamaSynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const int64_t n_embd = cfg.n_embd;
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

  // The tensors: llama's tensor table (models/llama_tensors.cpp), the loader's.
  TableParams tp(n_layer);
  tp.set("n_embd", n_embd), tp.set("n_vocab", n_vocab), tp.set("n_ff", cfg.n_ff), tp.set("n_rot", cfg.head_dim);
  tp.set("n_head", cfg.n_head), tp.set("n_head_kv", cfg.n_head_kv), tp.set("head_dim", cfg.head_dim);
  tp.set("head_dim_v", cfg.head_dim);
  std::vector<std::string_view> optional;
  if (cfg.llama3_rope) optional.push_back(tn::kRopeFreqs);
  if (!cfg.tied_embeddings) optional.push_back(tn::kOutput);
  CHIMERA_RETURN_IF_ERROR(add_table_tensors(p, "llama", tp, optional));
  if (cfg.llama3_rope) {
    const auto& r = *cfg.llama3_rope;
    for (SynthTensor& t : p.tensors)
      if (t.name == tn::kRopeFreqs)
        t.init = SynthInit::exact(format::llama3_rope_factors(cfg.head_dim, cfg.rope_theta, r.factor, r.low_freq_factor,
                                                              r.high_freq_factor, r.original_context));
  }
  return p;
}

}  // namespace chimera::models::synth
