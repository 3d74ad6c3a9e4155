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

}  // namespace

const std::vector<SynthModel>& synth_models() {
  static const std::vector<SynthModel> kModels = {
      {"llama-3.2-1b", "Meta Llama 3.2 1B: 16 layers, hidden 2048, GQA 32/8, vocab 128256",
       [](const SynthRequest& r) { return build_llama_plan(kLlama32_1B, r); }},
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
