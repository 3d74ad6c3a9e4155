// HParams implementation.
#include "models/hparams.h"

#include "format/gguf/tensor_names.h"

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

namespace {

// Rows of layer `layer`'s tensor `pattern` per head, or 0 when the tensor is
// absent or not a matrix; an error when the rows are not a multiple of the
// head count.
Result<int64_t> rows_per_head(const HParams& hp, const char* pattern, int64_t layer, int64_t n_heads) {
  const std::string t = format::tn::at(pattern, layer);
  const format::GgufTensorInfo* ti = hp.gguf().find_tensor(t);
  if (!ti || ti->ne.size() != 2) return int64_t{0};
  const int64_t rows = ti->ne[1];
  if (rows < 1 || rows % n_heads != 0)
    return invalid_argument("tensor '" + t + "' has " + std::to_string(rows) + " rows, not a multiple of its " +
                            std::to_string(n_heads) + " heads");
  return rows / n_heads;
}

}  // namespace

Result<HeadDims> read_head_dims(const HParams& hp, int64_t n_embd, int64_t n_head, int64_t n_head_kv,
                                int64_t layer) {
  HeadDims d;
  const int64_t naive = n_embd / n_head;
  const auto key_k = hp.gguf().get_int(hp.key("attention.key_length"));
  const auto key_v = hp.gguf().get_int(hp.key("attention.value_length"));
  if (key_k) {
    d.k = *key_k;
  } else {
    CHIMERA_ASSIGN_OR_RETURN(const int64_t from_q, rows_per_head(hp, format::tn::kAttnQ, layer, n_head));
    d.k = from_q > 0 ? from_q : naive;
    if (from_q > 0 && from_q != naive)
      hp.note("head size " + std::to_string(from_q) + " from " + format::tn::at(format::tn::kAttnQ, layer) + " (no " +
              hp.key("attention.key_length") + "; embedding_length / head_count would be " + std::to_string(naive) + ")");
  }
  if (key_v) {
    d.v = *key_v;
  } else {
    CHIMERA_ASSIGN_OR_RETURN(const int64_t from_v, rows_per_head(hp, format::tn::kAttnV, layer, n_head_kv));
    d.v = from_v > 0 ? from_v : d.k;
    if (from_v > 0 && from_v != d.k)
      hp.note("value head size " + std::to_string(from_v) + " from " + format::tn::at(format::tn::kAttnV, layer) + " (no " +
              hp.key("attention.value_length") + ")");
  }
  if (d.k < 1 || d.v < 1 || d.k > 4096 || d.v > 4096)
    return invalid_argument("invalid attention head size (key_length " + std::to_string(d.k) + ", value_length " +
                            std::to_string(d.v) + ")");
  return d;
}

Result<AttentionGeometry> read_attention_geometry(const HParams& hp, int64_t n_embd, int64_t layer) {
  AttentionGeometry a;
  CHIMERA_ASSIGN_OR_RETURN(a.n_head, hp.count("attention.head_count", 1 << 14));
  a.n_head_kv = hp.count_or("attention.head_count_kv", a.n_head);
  if (a.n_head_kv < 1 || a.n_head % a.n_head_kv != 0)
    return invalid_argument("attention.head_count (" + std::to_string(a.n_head) +
                            ") must be a multiple of head_count_kv (" + std::to_string(a.n_head_kv) + ")");
  CHIMERA_ASSIGN_OR_RETURN(const HeadDims d, read_head_dims(hp, n_embd, a.n_head, a.n_head_kv, layer));
  a.head_dim = d.k;
  a.head_dim_v = d.v;
  return a;
}

Result<int64_t> read_rope_dims(const HParams& hp, int64_t head_dim) {
  const int64_t n_rot = hp.count_or("rope.dimension_count", head_dim);
  if (n_rot < 1) return invalid_argument("metadata '" + hp.key("rope.dimension_count") + "' must be positive");
  if (n_rot > head_dim) {
    hp.note(hp.key("rope.dimension_count") + " " + std::to_string(n_rot) + " exceeds the head size " +
            std::to_string(head_dim) + ": the whole head is rotated");
    return head_dim;
  }
  return n_rot;
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
