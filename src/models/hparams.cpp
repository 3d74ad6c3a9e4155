// HParams implementation.
#include "models/hparams.h"

namespace chimera::models {

Result<int64_t> HParams::count(const std::string& k, int64_t max) const {
  const std::string full = key(k);
  const format::GgufValue* v = g_.find(full);
  if (!v) return not_found("missing metadata key '" + full + "'");
  auto i = v->as_int();
  if (!i) return invalid_argument("metadata '" + full + "' must be an integer");
  if (*i < 1 || *i > max)
    return invalid_argument("metadata '" + full + "' = " + std::to_string(*i) + " is out of range");
  return *i;
}

int64_t HParams::count_or(const std::string& k, int64_t dflt) const {
  auto v = g_.get_int(key(k));
  return v ? *v : dflt;
}

Result<float> HParams::real(const std::string& k) const {
  auto v = g_.get_float(key(k));
  if (!v) return not_found("missing metadata key '" + key(k) + "'");
  return (float)*v;
}

float HParams::real_or(const std::string& k, float dflt) const {
  auto v = g_.get_float(key(k));
  return v ? (float)*v : dflt;
}

bool HParams::flag_or(const std::string& k, bool dflt) const {
  auto v = g_.get_bool(key(k));
  return v ? *v : dflt;
}

Result<AttentionGeometry> read_attention_geometry(const HParams& hp, int64_t n_embd) {
  AttentionGeometry a;
  CHIMERA_ASSIGN_OR_RETURN(a.n_head, hp.count("attention.head_count", 1 << 14));
  a.n_head_kv = hp.count_or("attention.head_count_kv", a.n_head);
  if (a.n_head_kv < 1 || a.n_head % a.n_head_kv != 0)
    return invalid_argument("attention.head_count (" + std::to_string(a.n_head) +
                            ") must be a multiple of head_count_kv (" + std::to_string(a.n_head_kv) + ")");
  a.head_dim = hp.count_or("attention.key_length", n_embd / a.n_head);
  a.head_dim_v = hp.count_or("attention.value_length", a.head_dim);
  if (a.head_dim < 1 || a.head_dim_v < 1 || a.head_dim > 4096 || a.head_dim_v > 4096)
    return invalid_argument("invalid attention head size (key_length / value_length)");
  return a;
}

Result<kernels::RopeParams> read_rope(const HParams& hp, kernels::RopeMode mode, int64_t n_rot, int64_t n_ctx_train) {
  kernels::RopeParams p;
  p.mode = mode;
  p.n_rot = n_rot;
  p.freq_base = hp.real_or("rope.freq_base", 10000.f);
  float factor = hp.real_or("rope.scaling.factor", 0.f);
  if (factor == 0.f) factor = hp.real_or("rope.scale_linear", 1.0f);  // legacy key
  // Without a type key, a factor other than 1 means linear scaling (legacy files).
  const std::string type = hp.str("rope.scaling.type").value_or(factor != 1.f ? "linear" : "none");
  p.n_ctx_orig = hp.count_or("rope.scaling.original_context_length", n_ctx_train);
  if (type == "none" || type == "") {
    p.freq_scale = 1.f;
  } else if (type == "linear") {
    p.freq_scale = factor > 0 ? 1.f / factor : 1.f;
  } else if (type == "yarn") {
    p.freq_scale = factor > 0 ? 1.f / factor : 1.f;
    p.ext_factor = 1.f;
    p.attn_factor = hp.real_or("rope.scaling.attn_factor", 1.f);
    p.beta_fast = hp.real_or("rope.scaling.yarn_beta_fast", 32.f);
    p.beta_slow = hp.real_or("rope.scaling.yarn_beta_slow", 1.f);
  } else if (type == "longrope") {
    p.freq_scale = 1.f;  // factors come from rope_factors tensors
  } else {
    return unsupported("rope scaling type '" + type + "' is not supported");
  }
  if (n_rot <= 0 || n_rot % 2 != 0) return invalid_argument("rope dimension count must be even and positive");
  return p;
}

}  // namespace chimera::models
