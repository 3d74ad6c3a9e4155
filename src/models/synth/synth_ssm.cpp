// Plan builders for the state-space families of `synth`: arch "mamba" (pure
// Mamba-1), "mamba2" (pure Mamba-2) and "granitehybrid" (Granite 4.0-H: Mamba-2
// + attention layers, dense or MoE FFN). Keys and value types follow llama.cpp's
// converter (and the golden fixtures tiny-mamba.gguf / tiny-mamba2.gguf /
// tiny-granitehybrid.gguf); the tensors are each arch's tensor table (the
// loader's, models/<family>_tensors.cpp).
//
// --layers N on a hybrid: the first N layers of the real layer pattern; if those
// contain no attention layer (Granite's first attention layer is index 5), the
// last kept layer becomes attention, so any N >= 2 keeps both mixer kinds.
#include <algorithm>

#include "models/synth/synth_families.h"

namespace chimera::models::synth {

using format::GgufType;
using format::GgufValue;

namespace {
GgufValue u32(int64_t v) { return GgufValue::from_u32((uint32_t)v); }
GgufValue f32(double v) { return GgufValue::from_f32((float)v); }

// The Mamba-2 sizes of the tensor tables (models/tensor_blocks.h).
void set_mamba2_sizes(TableParams& tp, const Mamba2Geometry& g) {
  tp.set("d_inner", g.d_inner), tp.set("d_state", g.d_state), tp.set("d_conv", g.d_conv);
  tp.set("ssm_n_head", g.n_head), tp.set("n_group", g.n_group);
}

}  // namespace

Result<SynthPlan> build_mamba_plan(const MambaSynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const std::string a = "mamba.";
  SynthPlan p;
  set_general_header(p, "mamba", cfg.display_name);
  p.set(a + "context_length", u32(cfg.n_ctx));
  p.set(a + "embedding_length", u32(cfg.n_embd));
  p.set(a + "feed_forward_length", u32(0));
  p.set(a + "attention.head_count", u32(0));
  p.set(a + "block_count", u32(n_layer));
  p.set(a + "ssm.conv_kernel", u32(cfg.d_conv));
  p.set(a + "ssm.inner_size", u32(cfg.d_inner));
  p.set(a + "ssm.state_size", u32(cfg.d_state));
  p.set(a + "ssm.time_step_rank", u32(cfg.dt_rank));
  p.set(a + "attention.layer_norm_rms_epsilon", f32(cfg.rms_eps));
  p.set(a + "ssm.dt_b_c_rms", GgufValue::from_bool(false));
  CHIMERA_RETURN_IF_ERROR(add_spm_vocab(p, n_vocab));

  TableParams tp(n_layer);
  tp.set("n_embd", cfg.n_embd), tp.set("n_vocab", n_vocab), tp.set("d_inner", cfg.d_inner);
  tp.set("d_state", cfg.d_state), tp.set("d_conv", cfg.d_conv), tp.set("dt_rank", cfg.dt_rank);
  std::vector<std::string_view> optional;
  if (!cfg.tied_embeddings) optional.push_back(tn::kOutput);
  CHIMERA_RETURN_IF_ERROR(add_table_tensors(p, "mamba", tp, optional));
  return p;
}

Result<SynthPlan> build_mamba2_plan(const Mamba2SynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const int64_t n_embd = cfg.n_embd;
  const std::string a = "mamba2.";
  SynthPlan p;
  set_general_header(p, "mamba2", cfg.display_name);
  p.set(a + "context_length", u32(cfg.n_ctx));
  p.set(a + "embedding_length", u32(n_embd));
  p.set(a + "feed_forward_length", u32(0));
  p.set(a + "attention.head_count", u32(0));
  p.set(a + "block_count", u32(n_layer));
  p.set(a + "ssm.conv_kernel", u32(cfg.ssm.d_conv));
  p.set(a + "ssm.inner_size", u32(cfg.ssm.d_inner));
  p.set(a + "ssm.state_size", u32(cfg.ssm.d_state));
  p.set(a + "ssm.time_step_rank", u32(cfg.ssm.n_head));
  p.set(a + "ssm.group_count", u32(cfg.ssm.n_group));
  p.set(a + "attention.layer_norm_rms_epsilon", f32(cfg.rms_eps));
  CHIMERA_RETURN_IF_ERROR(add_spm_vocab(p, n_vocab));

  TableParams tp(n_layer);
  tp.set("n_embd", n_embd), tp.set("n_vocab", n_vocab);
  set_mamba2_sizes(tp, cfg.ssm);
  std::vector<std::string_view> optional;
  if (!cfg.tied_embeddings) optional.push_back(tn::kOutput);
  CHIMERA_RETURN_IF_ERROR(add_table_tensors(p, "mamba2", tp, optional));
  return p;
}

Result<SynthPlan> build_granitehybrid_plan(const GraniteHybridSynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const int64_t n_embd = cfg.n_embd;
  const int64_t head_dim = n_embd / cfg.n_head;
  // Layer pattern (see the file comment for how --layers truncates it).
  std::vector<bool> is_attn((size_t)n_layer, false);
  bool any_attn = false;
  for (int64_t i : cfg.attn_layers)
    if (i < n_layer) is_attn[(size_t)i] = any_attn = true;
  if (!any_attn && n_layer >= 2) is_attn.back() = true;
  std::vector<GgufValue> kv_heads;
  for (bool att : is_attn) kv_heads.push_back(GgufValue::from_i32(att ? (int32_t)cfg.n_head_kv : 0));

  const std::string a = "granitehybrid.";
  SynthPlan p;
  set_general_header(p, "granitehybrid", cfg.display_name);
  p.set(a + "context_length", u32(cfg.n_ctx));
  p.set(a + "embedding_length", u32(n_embd));
  p.set(a + "block_count", u32(n_layer));
  p.set(a + "feed_forward_length", u32(cfg.n_ff));
  if (cfg.n_expert > 0) {
    p.set(a + "expert_feed_forward_length", u32(cfg.n_ff));
    p.set(a + "expert_shared_feed_forward_length", u32(cfg.n_ff_shexp));
    p.set(a + "expert_count", u32(cfg.n_expert));
    p.set(a + "expert_used_count", u32(cfg.n_expert_used));
  }
  p.set(a + "attention.head_count", u32(cfg.n_head));
  p.set(a + "attention.head_count_kv", GgufValue::from_array(GgufType::INT32, std::move(kv_heads)));
  p.set(a + "attention.layer_norm_rms_epsilon", f32(cfg.rms_eps));
  p.set(a + "rope.freq_base", f32(cfg.rope_theta));
  p.set(a + "rope.scaling.finetuned", GgufValue::from_bool(cfg.use_rope));
  p.set(a + "embedding_scale", f32(cfg.embedding_scale));
  p.set(a + "residual_scale", f32(cfg.residual_scale));
  p.set(a + "logit_scale", f32(cfg.logit_scale));
  p.set(a + "attention.scale", f32(cfg.attention_scale));
  p.set(a + "ssm.conv_kernel", u32(cfg.ssm.d_conv));
  p.set(a + "ssm.inner_size", u32(cfg.ssm.d_inner));
  p.set(a + "ssm.state_size", u32(cfg.ssm.d_state));
  p.set(a + "ssm.time_step_rank", u32(cfg.ssm.n_head));
  p.set(a + "ssm.group_count", u32(cfg.ssm.n_group));
  p.set(a + "vocab_size", u32(n_vocab));
  CHIMERA_RETURN_IF_ERROR(add_spm_vocab(p, n_vocab));

  // The tensors: granitehybrid's tensor table for this layer plan (tied head: tie_word_embeddings).
  TableParams tp(n_layer);
  tp.set("n_embd", n_embd), tp.set("n_vocab", n_vocab), tp.set("n_ff", cfg.n_ff);
  tp.set("n_head", cfg.n_head), tp.set("n_head_kv", cfg.n_head_kv);
  tp.set("head_dim", head_dim), tp.set("head_dim_v", head_dim);
  set_mamba2_sizes(tp, cfg.ssm);
  tp.set("n_expert", cfg.n_expert), tp.set("n_ff_shexp", cfg.n_ff_shexp);
  for (int64_t l = 0; l < n_layer; ++l) {
    tp.tag(l, is_attn[(size_t)l] ? "attn" : "mamba2");
    tp.tag(l, cfg.n_expert > 0 ? "moe" : "dense");
    if (cfg.n_expert > 0 && cfg.n_ff_shexp > 0) tp.tag(l, "shexp");
  }
  CHIMERA_RETURN_IF_ERROR(add_table_tensors(p, "granitehybrid", tp, {tn::kSsmConv1dBias}));
  return p;
}

}  // namespace chimera::models::synth
