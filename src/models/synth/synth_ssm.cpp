// Plan builders for the Mamba-2 families of `synth`: arch "mamba2" (pure SSM) and
// arch "granitehybrid" (Granite 4.0-H: Mamba-2 + attention layers, dense or MoE
// FFN). Keys, value types and tensor names follow llama.cpp's converter (and the
// golden fixtures tiny-mamba2.gguf / tiny-granitehybrid.gguf): ssm_in packs
// [z, x, B, C, dt] (2*d_inner + 2*n_group*d_state + n_head rows), ssm_a / ssm_d are
// [1, n_head], ssm_norm is [d_inner / n_group, n_group].
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
}  // namespace

void add_mamba2_tensors(SynthPlan& p, const std::string& b, int64_t n_embd, const Mamba2Geometry& g) {
  const int64_t conv_ch = g.d_inner + 2 * g.n_group * g.d_state;
  const SynthInit w = SynthInit::normal(0.02f);
  p.tensors.push_back({b + "ssm_in.weight", {n_embd, 2 * g.d_inner + 2 * g.n_group * g.d_state + g.n_head}, w});
  p.tensors.push_back({b + "ssm_conv1d.weight", {g.d_conv, conv_ch}, SynthInit::normal(0.2f)});
  p.tensors.push_back({b + "ssm_conv1d.bias", {conv_ch}, SynthInit::constant(0.0f)});
  p.tensors.push_back({b + "ssm_dt.bias", {g.n_head}, SynthInit::normal(0.5f)});
  // A = -exp(A_log) with A_log = 0: a stable decay (a random sign could grow the state).
  p.tensors.push_back({b + "ssm_a", {1, g.n_head}, SynthInit::constant(-1.0f)});
  p.tensors.push_back({b + "ssm_d", {1, g.n_head}, SynthInit::constant(1.0f)});
  p.tensors.push_back({b + "ssm_norm.weight", {g.d_inner / g.n_group, g.n_group}, SynthInit::constant(1.0f)});
  p.tensors.push_back({b + "ssm_out.weight", {g.d_inner, n_embd}, w});
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

  const SynthInit w = SynthInit::normal(0.02f);
  const SynthInit ones = SynthInit::constant(1.0f);
  p.tensors.push_back({"token_embd.weight", {n_embd, n_vocab}, w});
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.tensors.push_back({b + "attn_norm.weight", {n_embd}, ones});
    add_mamba2_tensors(p, b, n_embd, cfg.ssm);
  }
  p.tensors.push_back({"output_norm.weight", {n_embd}, ones});
  if (!cfg.tied_embeddings) p.tensors.push_back({"output.weight", {n_embd, n_vocab}, w});
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

  const SynthInit w = SynthInit::normal(0.02f);
  const SynthInit ones = SynthInit::constant(1.0f);
  const int64_t n_q = cfg.n_head * head_dim, n_kv = cfg.n_head_kv * head_dim;
  p.tensors.push_back({"token_embd.weight", {n_embd, n_vocab}, w});  // tied head (tie_word_embeddings)
  for (int64_t l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    p.tensors.push_back({b + "attn_norm.weight", {n_embd}, ones});
    if (is_attn[(size_t)l]) {
      p.tensors.push_back({b + "attn_q.weight", {n_embd, n_q}, w});
      p.tensors.push_back({b + "attn_k.weight", {n_embd, n_kv}, w});
      p.tensors.push_back({b + "attn_v.weight", {n_embd, n_kv}, w});
      p.tensors.push_back({b + "attn_output.weight", {n_q, n_embd}, w});
    } else {
      add_mamba2_tensors(p, b, n_embd, cfg.ssm);
    }
    p.tensors.push_back({b + "ffn_norm.weight", {n_embd}, ones});
    if (cfg.n_expert > 0) {
      p.tensors.push_back({b + "ffn_gate_inp.weight", {n_embd, cfg.n_expert}, w});
      p.tensors.push_back({b + "ffn_gate_exps.weight", {n_embd, cfg.n_ff, cfg.n_expert}, w});
      p.tensors.push_back({b + "ffn_up_exps.weight", {n_embd, cfg.n_ff, cfg.n_expert}, w});
      p.tensors.push_back({b + "ffn_down_exps.weight", {cfg.n_ff, n_embd, cfg.n_expert}, w});
      p.tensors.push_back({b + "ffn_gate_shexp.weight", {n_embd, cfg.n_ff_shexp}, w});
      p.tensors.push_back({b + "ffn_up_shexp.weight", {n_embd, cfg.n_ff_shexp}, w});
      p.tensors.push_back({b + "ffn_down_shexp.weight", {cfg.n_ff_shexp, n_embd}, w});
    } else {
      p.tensors.push_back({b + "ffn_gate.weight", {n_embd, cfg.n_ff}, w});
      p.tensors.push_back({b + "ffn_up.weight", {n_embd, cfg.n_ff}, w});
      p.tensors.push_back({b + "ffn_down.weight", {cfg.n_ff, n_embd}, w});
    }
  }
  p.tensors.push_back({"output_norm.weight", {n_embd}, ones});
  return p;
}

}  // namespace chimera::models::synth
