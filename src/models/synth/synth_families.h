// Family builders for `synth`, one per llama.cpp architecture layout. Each takes
// its family's config (numbers copied from the real checkpoint's config.json)
// and a request (layer/vocab overrides) and returns a plan using llama.cpp's
// metadata keys and tensor names for that architecture. Model table entries in
// synth_registry.cpp pair a NAME with a builder and a config.
#pragma once

#include <optional>
#include <string_view>

#include "models/synth/synth.h"

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

}  // namespace chimera::models::synth
