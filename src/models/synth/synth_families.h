// Family builders for `synth`, one per llama.cpp architecture layout. Each takes
// its family's config (numbers copied from the real checkpoint's config.json)
// and a request (layer/vocab overrides) and returns a plan using llama.cpp's
// metadata keys for that architecture and its tensor table's tensors (the
// loader's, models/tensor_table.h; add_table_tensors). Model table entries in
// synth_registry.cpp pair a NAME with a builder and a config.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/synth/synth.h"
#include "models/tensor_table.h"

namespace chimera::models::synth {

// Llama-style decoder (arch "llama"): RMSNorm, GQA attention with RoPE, SwiGLU FFN.
struct LlamaSynthConfig {
  std::string_view display_name;  // general.name
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  bool tied_embeddings = false;  // no output.weight: llama.cpp reuses token_embd
  struct Llama3Rope {
    double factor, low_freq_factor, high_freq_factor, original_context;
  };
  std::optional<Llama3Rope> llama3_rope;  // written as rope_freqs.weight
};
Result<SynthPlan> build_llama_plan(const LlamaSynthConfig& cfg, const SynthRequest& req);

// Mamba-2 SSM block geometry shared by arch "mamba2" and "granitehybrid"
// (d_inner = expand * n_embd = n_head * head_dim).
struct Mamba2Geometry {
  int64_t d_inner = 0, d_state = 0, d_conv = 0, n_head = 0, n_group = 0;
};

// Granite 4.0 hybrid (arch "granitehybrid"): Mamba-2 and attention layers (per-layer
// attention.head_count_kv, 0 = Mamba-2), dense SwiGLU or MoE + shared expert FFN.
struct GraniteHybridSynthConfig {
  std::string_view display_name;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0;
  std::vector<int64_t> attn_layers;  // indices of the attention layers (layer_types)
  Mamba2Geometry ssm;
  int64_t n_ff = 0;                  // dense: shared_intermediate_size; MoE: intermediate_size
  int64_t n_expert = 0, n_expert_used = 0, n_ff_shexp = 0;  // n_expert 0 = dense
  int64_t n_vocab = 0, n_ctx = 0;
  double rope_theta = 10000.0, rms_eps = 1e-5;
  double embedding_scale = 1, residual_scale = 1, logit_scale = 1, attention_scale = 0;
  bool use_rope = false;  // position_embedding_type "rope" (Granite 4.0-H: "nope")
};
Result<SynthPlan> build_granitehybrid_plan(const GraniteHybridSynthConfig& cfg, const SynthRequest& req);

// Pure Mamba-1 (arch "mamba").
struct MambaSynthConfig {
  std::string_view display_name;
  int64_t n_embd = 0, n_layer = 0;
  int64_t d_inner = 0, d_state = 0, d_conv = 0, dt_rank = 0;
  int64_t n_vocab = 0, n_ctx = 1048576;
  double rms_eps = 1e-5;
  bool tied_embeddings = true;
};
Result<SynthPlan> build_mamba_plan(const MambaSynthConfig& cfg, const SynthRequest& req);

// Pure Mamba-2 (arch "mamba2").
struct Mamba2SynthConfig {
  std::string_view display_name;
  int64_t n_embd = 0, n_layer = 0;
  Mamba2Geometry ssm;
  int64_t n_vocab = 0, n_ctx = 1048576;
  double rms_eps = 1e-5;
  bool tied_embeddings = true;
};
Result<SynthPlan> build_mamba2_plan(const Mamba2SynthConfig& cfg, const SynthRequest& req);

// PhiMoE (arch "phimoe"): LayerNorm with bias, attention with biases, top-k MoE.
struct PhiMoeSynthConfig {
  std::string_view display_name;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_ff = 0, n_expert = 0, n_expert_used = 0;
  int64_t n_vocab = 0, n_ctx = 0, n_ctx_orig = 0;
  int64_t sliding_window = 0;  // config sliding_window, written as llama.cpp's converter does (0: none)
  double rope_theta = 10000.0, rms_eps = 1e-5;
  bool output_bias = false;  // lm_head_bias
  // LongRoPE (rope_scaling.type "longrope"): rope_factors_{long,short}.weight [head_dim/2] and
  // rope.scaling.attn_factor = sqrt(1 + ln(n_ctx/n_ctx_orig) / ln(n_ctx_orig)), as the converter writes them.
  bool longrope = false;
};
Result<SynthPlan> build_phimoe_plan(const PhiMoeSynthConfig& cfg, const SynthRequest& req);

// LLaDA (arch "llada"): llama block, non-causal, with a mask token.
struct LladaSynthConfig {
  std::string_view display_name;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0;
  int64_t n_vocab = 0, n_ctx = 0, mask_token_id = 0;
  double rope_theta = 10000.0, rms_eps = 1e-5;
};
Result<SynthPlan> build_llada_plan(const LladaSynthConfig& cfg, const SynthRequest& req);

// BitNet b1.58 (arch "bitnet"): llama block with attn/ffn sub-norms, squared-ReLU FFN.
struct BitnetSynthConfig {
  std::string_view display_name;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0;
  int64_t n_vocab = 0, n_ctx = 0;
  double rope_theta = 10000.0, rms_eps = 1e-5;
  bool relu2 = true;
};
Result<SynthPlan> build_bitnet_plan(const BitnetSynthConfig& cfg, const SynthRequest& req);

// Phi-4-mini-flash (arch "phi4flash", SambaY): Mamba-1, sliding-window and full
// differential attention, GMU and cross-attention layers (docs/PHI4FLASH.md).
struct Phi4FlashSynthConfig {
  std::string_view display_name;
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0;
  int64_t n_vocab = 0, n_ctx = 0, sliding_window = 0, mamba_period = 2;
  int64_t mamba_d_state = 16, mamba_d_conv = 4, mamba_expand = 2, mamba_dt_rank = 0;
  double eps = 1e-5;
};
Result<SynthPlan> build_phi4flash_plan(const Phi4FlashSynthConfig& cfg, const SynthRequest& req);

// general.architecture / type / name and file_type (0 until apply_type sets it).
void set_general_header(SynthPlan& p, const std::string& arch, std::string_view name);

// Appends the tensors of arch's tensor table (models/tensor_table.h) for these
// sizes and layer plan, in table order: every required tensor and the optional
// ones whose table pattern is listed in `optional`; values from the table's
// fills, roles from its roles. A listed pattern the table does not have is an
// error.
Status add_table_tensors(SynthPlan& p, std::string_view arch, const TableParams& params,
                         const std::vector<std::string_view>& optional = {});


}  // namespace chimera::models::synth
