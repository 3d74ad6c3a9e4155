// Plan builder for Phi-4-mini-flash-reasoning (arch "phi4flash", SambaY), with
// the keys `chimera convert` writes (docs/PHI4FLASH.md) and the tensors of
// phi4flash's tensor table (models/phi4flash_tensors.cpp). The
// layer kinds follow from block_count L and mamba_period P exactly as the
// loader derives them: Mamba-1 (i < L/2 + 2, i % P == 0), sliding-window
// differential attention (i < L/2, odd), the full-attention KV producer
// (L/2 + 1), GMU (i ≥ L/2 + 2, i % P == 0) and cross attention (Q only).
// --layers N keeps that rule for the smaller N, so N must be a multiple of 2·P.
#include "models/synth/synth_families.h"

namespace chimera::models::synth {

using format::GgufValue;

namespace {
GgufValue u32(int64_t v) { return GgufValue::from_u32((uint32_t)v); }
GgufValue f32(double v) { return GgufValue::from_f32((float)v); }
}  // namespace

Result<SynthPlan> build_phi4flash_plan(const Phi4FlashSynthConfig& cfg, const SynthRequest& req) {
  const int64_t n_layer = req.n_layers.value_or(cfg.n_layer);
  const int64_t n_vocab = req.n_vocab.value_or(cfg.n_vocab);
  const int64_t P = cfg.mamba_period;
  if (n_layer < 4 || n_layer % (2 * P) != 0)
    return invalid_argument("phi4flash: --layers must be a multiple of " + std::to_string(2 * P) +
                            " (at least 4): the layer plan needs an even count whose half is a multiple of "
                            "mb_per_layer " + std::to_string(P));
  const int64_t d = cfg.n_embd, hd = d / cfg.n_head, half = n_layer / 2;
  const int64_t d_inner = cfg.mamba_expand * d;
  const std::string a = "phi4flash.";
  SynthPlan p;
  set_general_header(p, "phi4flash", cfg.display_name);
  p.set(a + "context_length", u32(cfg.n_ctx));
  p.set(a + "embedding_length", u32(d));
  p.set(a + "block_count", u32(n_layer));
  p.set(a + "feed_forward_length", u32(cfg.n_ff));
  p.set(a + "attention.head_count", u32(cfg.n_head));
  p.set(a + "attention.head_count_kv", u32(cfg.n_head_kv));
  p.set(a + "attention.key_length", u32(hd));
  p.set(a + "attention.value_length", u32(hd));
  p.set(a + "attention.layer_norm_epsilon", f32(cfg.eps));
  p.set(a + "attention.sliding_window", u32(cfg.sliding_window));
  p.set(a + "ssm.conv_kernel", u32(cfg.mamba_d_conv));
  p.set(a + "ssm.inner_size", u32(d_inner));
  p.set(a + "ssm.state_size", u32(cfg.mamba_d_state));
  p.set(a + "ssm.time_step_rank", u32(cfg.mamba_dt_rank));
  p.set(a + "mamba_period", u32(P));
  CHIMERA_RETURN_IF_ERROR(add_spm_vocab(p, n_vocab));

  // The tensors: phi4flash's tensor table for the layer plan (tied lm-head).
  TableParams tp(n_layer);
  for (int64_t i = 0; i < n_layer; ++i) {
    const bool mamba = i % P == 0, cross = i >= half + 2;
    tp.tag(i, mamba ? (cross ? "gmu" : "mamba") : (cross ? "cross_attn" : "self_attn"));
    if (!mamba) tp.tag(i, "diff_attn");
  }
  tp.set("n_embd", d), tp.set("n_vocab", n_vocab), tp.set("n_ff", cfg.n_ff);
  tp.set("n_head", cfg.n_head), tp.set("n_head_kv", cfg.n_head_kv), tp.set("head_dim", hd);
  tp.set("d_inner", d_inner), tp.set("d_state", cfg.mamba_d_state), tp.set("d_conv", cfg.mamba_d_conv);
  tp.set("dt_rank", cfg.mamba_dt_rank);
  CHIMERA_RETURN_IF_ERROR(add_table_tensors(p, "phi4flash", tp,
                                            {tn::kAttnQkvBias, tn::kAttnQBias, tn::kAttnOutputBias}));
  return p;
}

}  // namespace chimera::models::synth
