// Plan builder for Phi-4-mini-flash-reasoning (arch "phi4flash", SambaY), with
// the keys and tensor names `chimera convert` writes (docs/PHI4FLASH.md). The
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
  const int64_t n_q = cfg.n_head * hd, n_kv = cfg.n_head_kv * hd;
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

  const SynthInit w = SynthInit::normal(0.02f);
  const SynthInit ones = SynthInit::constant(1.0f), zeros = SynthInit::constant(0.0f);
  p.tensors.push_back({"token_embd.weight", {d, n_vocab}, w});  // tied lm-head
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const bool mamba = i % P == 0, cross = i >= half + 2;
    p.tensors.push_back({b + "attn_norm.weight", {d}, ones});
    p.tensors.push_back({b + "attn_norm.bias", {d}, zeros});
    if (mamba && !cross) {  // Mamba-1 (no in/out projection bias: mamba_proj_bias false)
      p.tensors.push_back({b + "ssm_in.weight", {d, 2 * d_inner}, w});
      p.tensors.push_back({b + "ssm_conv1d.weight", {cfg.mamba_d_conv, d_inner}, SynthInit::normal(0.2f)});
      p.tensors.push_back({b + "ssm_conv1d.bias", {d_inner}, zeros});
      p.tensors.push_back({b + "ssm_x.weight", {d_inner, cfg.mamba_dt_rank + 2 * cfg.mamba_d_state}, w});
      p.tensors.push_back({b + "ssm_dt.weight", {cfg.mamba_dt_rank, d_inner}, w});
      p.tensors.push_back({b + "ssm_dt.bias", {d_inner}, SynthInit::normal(0.5f)});
      // A = −exp(A_log) with A_log = 0: a stable decay.
      p.tensors.push_back({b + "ssm_a", {cfg.mamba_d_state, d_inner}, SynthInit::constant(-1.0f)});
      p.tensors.push_back({b + "ssm_d", {d_inner}, ones});
      p.tensors.push_back({b + "ssm_out.weight", {d_inner, d}, w});
    } else if (mamba) {  // GMU
      p.tensors.push_back({b + "gmu_in.weight", {d, d_inner}, w});
      p.tensors.push_back({b + "gmu_out.weight", {d_inner, d}, w});
    } else {  // differential attention: self (q|k|v) or cross (q only)
      const int64_t rows = cross ? n_q : n_q + 2 * n_kv;
      const std::string proj = cross ? "attn_q" : "attn_qkv";
      p.tensors.push_back({b + proj + ".weight", {d, rows}, w});
      p.tensors.push_back({b + proj + ".bias", {rows}, zeros});
      p.tensors.push_back({b + "attn_output.weight", {n_q, d}, w});
      p.tensors.push_back({b + "attn_output.bias", {d}, zeros});
      for (const char* l : {"q1", "k1", "q2", "k2"})
        p.tensors.push_back({b + "attn_lambda_" + l + ".weight", {hd}, SynthInit::normal(0.1f)});
      p.tensors.push_back({b + "attn_sub_norm.weight", {2 * hd}, ones});
    }
    p.tensors.push_back({b + "ffn_norm.weight", {d}, ones});
    p.tensors.push_back({b + "ffn_norm.bias", {d}, zeros});
    p.tensors.push_back({b + "ffn_up.weight", {d, 2 * cfg.n_ff}, w});  // [gate | up]
    p.tensors.push_back({b + "ffn_down.weight", {cfg.n_ff, d}, w});
  }
  p.tensors.push_back({"output_norm.weight", {d}, ones});
  p.tensors.push_back({"output_norm.bias", {d}, zeros});
  return p;
}

}  // namespace chimera::models::synth
