// The `synth --like NAME` table. One entry per real checkpoint: its NAME, a
// description, and the family builder with the checkpoint's numbers. Adding a
// model of an existing family is one entry; a new family adds a builder file.
#include "models/synth/synth_families.h"

namespace chimera::models::synth {

namespace {

// meta-llama/Llama-3.2-1B (config.json): tied embeddings, llama3 rope scaling.
constexpr LlamaSynthConfig kLlama32_1B = {
    .display_name = "Llama 3.2 1B (synthetic)",
    .n_embd = 2048,
    .n_layer = 16,
    .n_head = 32,
    .n_head_kv = 8,
    .head_dim = 64,
    .n_ff = 8192,
    .n_vocab = 128256,
    .n_ctx = 131072,
    .rope_theta = 500000.0,
    .rms_eps = 1e-5,
    .tied_embeddings = true,
    .llama3_rope = LlamaSynthConfig::Llama3Rope{32.0, 1.0, 4.0, 8192.0},
};

// Values below are copied from each checkpoint's config.json (HF names in
// comments); "vocab" is the embedding row count the converter writes.

// ibm-granite/granite-4.0-h-micro: dense (num_local_experts 0), 40 layers with
// attention at layer_types indices 5/15/25/35 (9:1 Mamba-2:attention), NoPE.
const GraniteHybridSynthConfig kGraniteHMicro = {
    .display_name = "Granite 4.0 H Micro (synthetic)",
    .n_embd = 2048,     // hidden_size
    .n_layer = 40,      // num_hidden_layers
    .n_head = 32,       // num_attention_heads
    .n_head_kv = 8,     // num_key_value_heads
    .attn_layers = {5, 15, 25, 35},
    .ssm = {.d_inner = 4096, .d_state = 128, .d_conv = 4, .n_head = 64, .n_group = 1},  // mamba_expand 2, mamba_d_head 64
    .n_ff = 8192,       // shared_intermediate_size (dense FFN)
    .n_vocab = 100352,
    .n_ctx = 131072,    // max_position_embeddings
    .rope_theta = 10000.0,
    .rms_eps = 1e-5,
    .embedding_scale = 12.0,       // embedding_multiplier
    .residual_scale = 0.246,       // residual_multiplier
    .logit_scale = 8.0,            // logits_scaling
    .attention_scale = 0.015625,   // attention_multiplier
    .use_rope = false,             // position_embedding_type "nope"
};

// ibm-granite/granite-4.0-h-tiny: 64 experts top-6, expert ff 512, shared ff 1024.
const GraniteHybridSynthConfig kGraniteHTiny = {
    .display_name = "Granite 4.0 H Tiny (synthetic)",
    .n_embd = 1536,
    .n_layer = 40,
    .n_head = 12,
    .n_head_kv = 4,
    .attn_layers = {5, 15, 25, 35},
    .ssm = {.d_inner = 3072, .d_state = 128, .d_conv = 4, .n_head = 48, .n_group = 1},
    .n_ff = 512,          // intermediate_size (per expert)
    .n_expert = 64,       // num_local_experts
    .n_expert_used = 6,   // num_experts_per_tok
    .n_ff_shexp = 1024,   // shared_intermediate_size
    .n_vocab = 100352,
    .n_ctx = 131072,
    .rope_theta = 10000.0,
    .rms_eps = 1e-5,
    .embedding_scale = 12.0,
    .residual_scale = 0.22,
    .logit_scale = 6.0,
    .attention_scale = 0.0078125,
    .use_rope = false,
};

// state-spaces/mamba2-1.3b: d_model 2048, n_layer 48, ssm_cfg {d_state 128,
// headdim 64, ngroups 1, expand 2, d_conv 4}; vocab 50277 padded to a multiple
// of 16 (pad_vocab_size_multiple) = 50288; tie_embeddings.
constexpr Mamba2SynthConfig kMamba2_1_3B = {
    .display_name = "Mamba-2 1.3B (synthetic)",
    .n_embd = 2048,
    .n_layer = 48,
    .ssm = {.d_inner = 4096, .d_state = 128, .d_conv = 4, .n_head = 64, .n_group = 1},
    .n_vocab = 50288,
    .n_ctx = 1048576,  // the converter writes 2^20 (no trained limit)
    .rms_eps = 1e-5,
    .tied_embeddings = true,
};

// state-spaces/mamba-1.4b (config.json): d_model 2048, n_layer 48, vocab 50277 padded to a
// multiple of 8 (pad_vocab_size_multiple) = 50280, tie_embeddings; Mamba-1 mixer defaults:
// expand 2 (d_inner 4096), d_state 16, d_conv 4, dt_rank "auto" = ceil(2048 / 16) = 128,
// conv bias, no in/out projection bias. 1,372,178,432 parameters.
constexpr MambaSynthConfig kMamba1_4B = {
    .display_name = "Mamba 1.4B (synthetic)",
    .n_embd = 2048,
    .n_layer = 48,
    .d_inner = 4096,
    .d_state = 16,
    .d_conv = 4,
    .dt_rank = 128,
    .n_vocab = 50280,
    .n_ctx = 1048576,  // the converter writes 2^20 (no trained limit)
    .rms_eps = 1e-5,
    .tied_embeddings = true,
};

// microsoft/Phi-tiny-MoE-instruct (SlimMoE; config read from Phi-tiny-MoE-derived copies
// whose auto_map points at it: rkumar1999/phi-tiny-moe-math-lean-sft, yujiepan/phi-moe-tiny-random):
// hidden_size 4096, num_hidden_layers 32, num_attention_heads 16 x head_dim 128 (q width 2048 !=
// hidden), num_key_value_heads 4, intermediate_size 448, num_local_experts 16, num_experts_per_tok 2,
// vocab_size 32064, max_position_embeddings 4096, rope_scaling null, rope_theta 1e4, rms_norm_eps
// 1e-5, lm_head_bias true, sliding_window 2047. 3.8B total parameters (3.75B with these shapes).
constexpr PhiMoeSynthConfig kPhiTinyMoe = {
    .display_name = "Phi-tiny-MoE (synthetic)",
    .n_embd = 4096, .n_layer = 32, .n_head = 16, .n_head_kv = 4, .head_dim = 128,
    .n_ff = 448, .n_expert = 16, .n_expert_used = 2,
    .n_vocab = 32064, .n_ctx = 4096, .n_ctx_orig = 4096, .sliding_window = 2047,
    .rope_theta = 10000.0, .rms_eps = 1e-5, .output_bias = true,
};

// microsoft/Phi-3.5-MoE-instruct: hidden_size 4096, num_hidden_layers 32, heads 32 / KV 8
// (head_dim 128), intermediate_size 6400, 16 experts top-2, vocab_size 32064,
// max_position_embeddings 131072 (original 4096), rope_theta 1e4, rms_norm_eps 1e-5,
// lm_head_bias true, sliding_window 131072, rope_scaling longrope (64 + 64 factors,
// short/long_mscale 1.2432). 41.9B total parameters.
constexpr PhiMoeSynthConfig kPhi35Moe = {
    .display_name = "Phi-3.5-MoE (synthetic)",
    .n_embd = 4096, .n_layer = 32, .n_head = 32, .n_head_kv = 8, .head_dim = 128,
    .n_ff = 6400, .n_expert = 16, .n_expert_used = 2,
    .n_vocab = 32064, .n_ctx = 131072, .n_ctx_orig = 4096, .sliding_window = 131072,
    .rope_theta = 10000.0, .rms_eps = 1e-5, .output_bias = true, .longrope = true,
};

// GSAI-ML/LLaDA-8B-Instruct: d_model 4096, 32 layers, 32 heads (no GQA),
// mlp_hidden_size 12288, vocab 126464, max_sequence_length 4096, rope_theta 5e5,
// mask_token_id 126336.
constexpr LladaSynthConfig kLlada8B = {
    .display_name = "LLaDA 8B (synthetic)",
    .n_embd = 4096, .n_layer = 32, .n_head = 32, .n_head_kv = 32, .n_ff = 12288,
    .n_vocab = 126464, .n_ctx = 4096, .mask_token_id = 126336,
    .rope_theta = 500000.0, .rms_eps = 1e-5,
};

// microsoft/bitnet-b1.58-2B-4T: hidden 2560, 30 layers, 20/5 heads, intermediate
// 6912, relu2, vocab 128256, max_position_embeddings 4096, rope_theta 5e5, tied.
constexpr BitnetSynthConfig kBitnet2B4T = {
    .display_name = "BitNet b1.58 2B-4T (synthetic)",
    .n_embd = 2560, .n_layer = 30, .n_head = 20, .n_head_kv = 5, .n_ff = 6912,
    .n_vocab = 128256, .n_ctx = 4096, .rope_theta = 500000.0, .rms_eps = 1e-5, .relu2 = true,
};

// microsoft/Phi-4-mini-flash-reasoning (config.json): hidden_size 2560, 32 layers,
// 40 heads / 20 KV heads (head_dim 64), intermediate_size 10240, vocab_size 200064,
// max_position_embeddings 262144, sliding_window 512, mb_per_layer 2, layer_norm_eps
// 1e-5, tied embeddings; Mamba keys absent from config.json take the config class
// defaults: mamba_d_state 16, d_conv 4, expand 2, dt_rank "auto" = ceil(2560/16) = 160.
// 3,852,562,944 parameters (= the checkpoint index's 7,706,608,640 bytes: BF16, with
// A_log and the λ vectors in F32).
constexpr Phi4FlashSynthConfig kPhi4MiniFlash = {
    .display_name = "Phi-4-mini-flash-reasoning (synthetic)",
    .n_embd = 2560, .n_layer = 32, .n_head = 40, .n_head_kv = 20, .n_ff = 10240,
    .n_vocab = 200064, .n_ctx = 262144, .sliding_window = 512, .mamba_period = 2,
    .mamba_d_state = 16, .mamba_d_conv = 4, .mamba_expand = 2, .mamba_dt_rank = 160, .eps = 1e-5,
};

}  // namespace

const std::vector<SynthModel>& synth_models() {
  static const std::vector<SynthModel> kModels = {
      {"llama-3.2-1b", "Meta Llama 3.2 1B: 16 layers, hidden 2048, GQA 32/8, vocab 128256",
       [](const SynthRequest& r) { return build_llama_plan(kLlama32_1B, r); }},
      {"granite-4.0-h-micro", "IBM Granite 4.0 H Micro: 40 layers (4 attention, 36 Mamba-2), hidden 2048, dense FFN 8192",
       [](const SynthRequest& r) { return build_granitehybrid_plan(kGraniteHMicro, r); }},
      {"granite-4.0-h-tiny", "IBM Granite 4.0 H Tiny: 40 layers (4 attention, 36 Mamba-2), hidden 1536, 64 experts top-6",
       [](const SynthRequest& r) { return build_granitehybrid_plan(kGraniteHTiny, r); }},
      {"mamba2-1.3b", "Mamba-2 1.3B: 48 layers, hidden 2048, d_state 128, 64 heads, vocab 50288",
       [](const SynthRequest& r) { return build_mamba2_plan(kMamba2_1_3B, r); }},
      {"mamba-1.4b", "Mamba 1.4B (Mamba-1): 48 layers, hidden 2048, d_inner 4096, d_state 16, dt_rank 128, vocab 50280",
       [](const SynthRequest& r) { return build_mamba_plan(kMamba1_4B, r); }},
      {"phi-tiny-moe", "Phi-tiny-MoE: 32 layers, hidden 4096, 16 experts top-2 (ff 448), vocab 32064",
       [](const SynthRequest& r) { return build_phimoe_plan(kPhiTinyMoe, r); }},
      {"phi-3.5-moe", "Phi-3.5-MoE: 32 layers, hidden 4096, 16 experts top-2 (ff 6400), vocab 32064",
       [](const SynthRequest& r) { return build_phimoe_plan(kPhi35Moe, r); }},
      {"llada-8b", "LLaDA 8B (diffusion): 32 layers, hidden 4096, ff 12288, vocab 126464",
       [](const SynthRequest& r) { return build_llada_plan(kLlada8B, r); }},
      {"bitnet-b1.58-2b-4t", "BitNet b1.58 2B-4T: 30 layers, hidden 2560, GQA 20/5, ff 6912 (relu2), vocab 128256",
       [](const SynthRequest& r) { return build_bitnet_plan(kBitnet2B4T, r); }},
      {"phi-4-mini-flash-reasoning",
       "Phi-4-mini-flash-reasoning (SambaY): 32 layers (Mamba-1, SWA/full differential attention, GMU, cross), "
       "hidden 2560, 40/20 heads, vocab 200064",
       [](const SynthRequest& r) { return build_phi4flash_plan(kPhi4MiniFlash, r); }},
  };
  return kModels;
}

const SynthModel* find_synth_model(std::string_view name) {
  for (const auto& m : synth_models())
    if (m.name == name) return &m;
  return nullptr;
}

std::string synth_model_names() {
  std::string s;
  for (const auto& m : synth_models()) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

}  // namespace chimera::models::synth
